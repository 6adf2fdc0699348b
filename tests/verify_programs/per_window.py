"""Buggy (WF601): one tape per window, gradients summed across windows, state carried between them.

`--hoisted` runs the correct version: one tape around all windows.
"""

import sys

import numpy as np
import warp as wp
from common_kernels import add_to, sgd, sq_loss, step

N = 16
WINDOWS = 3
STEPS = 4


def main():
    hoisted = "--hoisted" in sys.argv
    rng = np.random.default_rng(1)
    k = wp.array(rng.uniform(1.0, 2.0, N).astype(np.float32), requires_grad=True)
    target = wp.array(rng.uniform(-0.2, 0.2, N).astype(np.float32))
    for it in range(2):
        x = wp.array(np.linspace(0.5, 1.0, N).astype(np.float32), requires_grad=True)
        v = wp.zeros(N, dtype=float, requires_grad=True)
        grad_sum = wp.zeros(N, dtype=float)
        total = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        for _w in range(WINDOWS):
            if not hoisted:
                tape = wp.Tape()
                total = wp.zeros(1, dtype=float, requires_grad=True)
            with tape:
                for _ in range(STEPS):
                    x2, v2 = wp.empty_like(x), wp.empty_like(v)
                    wp.launch(step, dim=N, inputs=[x, v, k], outputs=[x2, v2])
                    x, v = x2, v2
                wp.launch(sq_loss, dim=N, inputs=[x, target, total])
            if not hoisted:
                tape.backward(total)
                wp.launch(add_to, dim=N, inputs=[grad_sum, k.grad])
                tape.zero()
                # carry the state into the next window, outside any tape
                x = wp.clone(x, requires_grad=True)
                v = wp.clone(v, requires_grad=True)
        if hoisted:
            tape.backward(total)
            wp.copy(grad_sum, k.grad)
            tape.zero()
        if it == 0:
            print(f"loss0 = {total.numpy()[0]}")
        wp.launch(sgd, dim=N, inputs=[k, grad_sum, 0.01])


if __name__ == "__main__":
    main()
