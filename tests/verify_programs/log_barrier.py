"""Correct: a log barrier close to its pole. The largest FD step crosses the pole (the loss is NaN there,
as an inverted mesh element makes warp.fem's elastic_shape loss), the smaller ones do not."""

import numpy as np
import warp as wp

N = 8


@wp.kernel
def barrier(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.log(x[i] - 0.095))


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main() -> None:
    x = wp.array(np.full(N, 0.1, dtype=np.float32), requires_grad=True)
    tape = wp.Tape()
    for _ in range(2):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            wp.launch(barrier, dim=N, inputs=[x], outputs=[loss])
        tape.backward(loss)
        wp.launch(sgd, dim=N, inputs=[x, x.grad, 1.0e-6])
        tape.zero()


if __name__ == "__main__":
    main()
