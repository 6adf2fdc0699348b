"""Tune the growth rates of a population model (the logistic map, chaotic at r = 3.9) so that the
population after many generations sums to a target. Two buffers ping-pong between generations."""

import numpy as np
import warp as wp

N = 8
STEPS = 120


@wp.kernel
def logistic(x: wp.array(dtype=float), r: wp.array(dtype=float), x_out: wp.array(dtype=float)):
    i = wp.tid()
    x_out[i] = r[i] * x[i] * (1.0 - x[i])


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])


def main():
    r = wp.array(np.full(N, 3.9, dtype=np.float32), requires_grad=True)
    for it in range(2):
        a = wp.array(np.linspace(0.2, 0.7, N).astype(np.float32), requires_grad=True)
        b = wp.empty_like(a)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for _ in range(STEPS):
                wp.launch(logistic, dim=N, inputs=[a, r], outputs=[b])
                a, b = b, a
            wp.launch(total, dim=N, inputs=[a, loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        tape.zero()


if __name__ == "__main__":
    main()
