"""Robust line fit: a smooth absolute-value loss with a hand-written adjoint, plus a small
quadratic term on the same residual."""

import numpy as np
import warp as wp

from robust import smooth_abs

N = 48


@wp.kernel
def fit_loss(
    line: wp.array(dtype=float),
    x: wp.array(dtype=float),
    y: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    r = line[0] * x[i] + line[1] - y[i]
    wp.atomic_add(loss, 0, smooth_abs(r) + 0.1 * r * r)


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def forward(line, x, y, loss):
    wp.launch(fit_loss, dim=N, inputs=[line, x, y], outputs=[loss])


def setup():
    rng = np.random.default_rng(7)
    xs = rng.uniform(-2.0, 2.0, N)
    ys = 1.5 * xs - 0.4 + rng.normal(0.0, 0.05, N)
    ys[::7] += rng.normal(0.0, 3.0, len(ys[::7]))  # outliers
    line = wp.array([0.5, 0.5], dtype=float, requires_grad=True)
    return line, (wp.array(xs, dtype=float), wp.array(ys, dtype=float))


def main():
    line, (x, y) = setup()
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(line, x, y, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=2, inputs=[line, line.grad, 0.005])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
