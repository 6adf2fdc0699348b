"""Buggy (WF301): the tape is reused across iterations and never zeroed, so .grad accumulates."""

import numpy as np
import warp as wp
from common_kernels import sgd, sq_loss, step

N = 16


def main():
    rng = np.random.default_rng(2)
    k = wp.array(rng.uniform(1.0, 2.0, N).astype(np.float32), requires_grad=True)
    target = wp.array(rng.uniform(-0.2, 0.2, N).astype(np.float32))
    tape = wp.Tape()
    for it in range(3):
        x = wp.array(np.linspace(0.5, 1.0, N).astype(np.float32), requires_grad=True)
        v = wp.zeros(N, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            for _ in range(4):
                x2, v2 = wp.empty_like(x), wp.empty_like(v)
                wp.launch(step, dim=N, inputs=[x, v, k], outputs=[x2, v2])
                x, v = x2, v2
            wp.launch(sq_loss, dim=N, inputs=[x, target, loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd, dim=N, inputs=[k, k.grad, 0.05])
        tape = wp.Tape()


if __name__ == "__main__":
    main()
