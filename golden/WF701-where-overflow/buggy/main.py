"""Fit a logistic classifier (slope and bias) to labelled sensor readings, some of which are far
outliers, with the softplus (logistic) loss guarded against overflow by a wp.where."""

import numpy as np
import warp as wp

N = 64


@wp.kernel
def logistic_loss(
    w: wp.array(dtype=float),
    x: wp.array(dtype=float),
    y: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    z = -y[i] * (w[0] * x[i] + w[1])
    s = wp.where(z > 20.0, z, wp.log(1.0 + wp.exp(z)))
    wp.atomic_add(loss, 0, s / float(N))


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def forward(w, x, y, loss):
    wp.launch(logistic_loss, dim=N, inputs=[w, x, y], outputs=[loss])


def setup():
    rng = np.random.default_rng(4)
    xs = rng.normal(0.0, 1.0, N)
    xs[:4] = [60.0, -75.0, 90.0, -55.0]  # outliers
    ys = np.where(xs + 0.3 * rng.normal(size=N) > 0.0, 1.0, -1.0)
    ys[:4] = [-1.0, 1.0, -1.0, 1.0]  # mislabelled outliers
    x = wp.array(xs, dtype=float)
    y = wp.array(ys, dtype=float)
    w = wp.array([2.0, 0.1], dtype=float, requires_grad=True)
    return w, (x, y)


def main():
    w, (x, y) = setup()
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(w, x, y, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=2, inputs=[w, w.grad, 0.05])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
