"""Fit the spring constant of a damped oscillator to a measured trajectory. One tape is passed to
`train_step()` every iteration, which records into it again; `tape.zero()` clears the gradients but
keeps the old launches, so each backward replays every earlier iteration too."""

import numpy as np
import warp as wp

N = 8
STEPS = 6
DT = 0.1


@wp.kernel
def oscillate(k: wp.array(dtype=float), x0: wp.array(dtype=float), t: float, x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x0[i] * wp.cos(wp.sqrt(k[0]) * t) * wp.exp(-0.1 * t)


@wp.kernel
def misfit(x: wp.array(dtype=float), measured: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - measured[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def train_step(tape, k, x0, measured, x, loss, lr):
    loss.zero_()
    tape.reset()
    with tape:
        wp.launch(oscillate, dim=N, inputs=[k, x0, STEPS * DT], outputs=[x])
        wp.launch(misfit, dim=N, inputs=[x, measured], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[k, k.grad, lr])
    tape.zero()


def main():
    rng = np.random.default_rng(1)
    k = wp.array([2.0], dtype=float, requires_grad=True)
    x0 = wp.array(rng.uniform(0.5, 1.0, N), dtype=float)
    measured = wp.array(rng.uniform(-0.5, 0.5, N), dtype=float)
    x = wp.zeros(N, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    for it in range(3):
        train_step(tape, k, x0, measured, x, loss, 0.05)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"forward: x3 = {x.numpy()[3]}")
    print(f"k = {k.numpy()[0]}")


if __name__ == "__main__":
    main()
