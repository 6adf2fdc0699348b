"""Buggy (WF303): the state is reset after the tape block but before its backward."""

import numpy as np
import warp as wp
from common_kernels import sgd, sq_loss, step

N = 16


def main():
    rng = np.random.default_rng(4)
    k = wp.array(rng.uniform(1.0, 2.0, N).astype(np.float32), requires_grad=True)
    target = wp.array(rng.uniform(-0.2, 0.2, N).astype(np.float32))
    x0 = np.linspace(0.5, 1.0, N).astype(np.float32)
    states = [wp.array(x0, requires_grad=True) for _ in range(5)]
    vels = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(5)]
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for s in range(4):
                wp.launch(step, dim=N, inputs=[states[s], vels[s], k], outputs=[states[s + 1], vels[s + 1]])
            wp.launch(sq_loss, dim=N, inputs=[states[4], target, loss])
        for s in range(1, 5):
            states[s].assign(x0)  # episode reset placed before the backward
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd, dim=N, inputs=[k, k.grad, 0.05])
        tape.zero()


if __name__ == "__main__":
    main()
