"""Buggy (WF103), dormant at iteration 0: after each iteration `states[0] = states[-1]` makes the first
and last state buffers one array, so from the second iteration on the last step overwrites what the
first step read. `--fixed` rotates distinct buffers instead."""

import sys

import numpy as np
import warp as wp
from common_kernels import sgd, sq_loss, step

N = 16
STEPS = 3


def main():
    fixed = "--fixed" in sys.argv
    rng = np.random.default_rng(6)
    k = wp.array(rng.uniform(1.0, 2.0, N).astype(np.float32), requires_grad=True)
    target = wp.zeros(N, dtype=float)
    xs = [wp.array(np.linspace(0.5, 1.0, N).astype(np.float32), requires_grad=True)]
    xs += [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS)]
    vs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            for s in range(STEPS):
                wp.launch(step, dim=N, inputs=[xs[s], vs[s], k], outputs=[xs[s + 1], vs[s + 1]])
            wp.launch(sq_loss, dim=N, inputs=[xs[STEPS], target, loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd, dim=N, inputs=[k, k.grad, 0.05])
        tape.reset()
        if fixed:
            xs[0], xs[STEPS] = xs[STEPS], xs[0]
            vs[0], vs[STEPS] = vs[STEPS], vs[0]
        else:
            xs[0] = xs[STEPS]
            vs[0] = vs[STEPS]


if __name__ == "__main__":
    main()
