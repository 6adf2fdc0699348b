"""Fit p so that sum(p^2) plus a small linear term is minimal. The linear term's path runs through `b`,
allocated without requires_grad: its gradient (0.25% of the total here) never reaches p."""

import numpy as np
import warp as wp

N = 8


@wp.kernel
def square(p: wp.array(dtype=float), a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = p[i] * p[i]


@wp.kernel
def halve(p: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = 0.5 * p[i]


@wp.kernel
def total(a: wp.array(dtype=float), b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, a[i] + 0.01 * b[i])


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main():
    p = wp.array(np.linspace(1.0, 2.0, N), dtype=float, requires_grad=True)
    a = wp.zeros(N, dtype=float, requires_grad=True)
    b = wp.zeros(N, dtype=float)
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(square, dim=N, inputs=[p], outputs=[a])
            wp.launch(halve, dim=N, inputs=[p], outputs=[b])
            wp.launch(total, dim=N, inputs=[a, b], outputs=[loss])
        tape.backward(loss)
        print(f"iter {it}: loss = {loss.numpy()[0]:.6f}")
        wp.launch(sgd, dim=N, inputs=[p, p.grad, 0.01])
        tape.zero()


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        main()
