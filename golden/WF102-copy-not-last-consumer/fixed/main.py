"""Steer a swarm where only the awake particles move: fit the wind that pushes them to a target line.

Sleeping particles keep their positions, so each step starts from a copy of the current state."""

from typing import Any

import numpy as np
import warp as wp

N = 24
STEPS = 20
DT = 0.05


@wp.kernel
def copy_array(src: wp.array(dtype=Any), dst: wp.array(dtype=Any)):
    i = wp.tid()
    dst[i] = src[i]


@wp.kernel
def advect_awake(
    q: wp.array(dtype=wp.vec2), awake: wp.array(dtype=int), wind: wp.array(dtype=wp.vec2), dt: float,
    q_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    if awake[i] != 0:
        p = q[i]
        swirl = wp.vec2(-p[1], p[0]) * wp.sin(wp.length(p))
        q_out[i] = p + dt * (wind[0] + 0.5 * swirl)


@wp.kernel
def line_loss(q: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i][1] - 1.0
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(x: wp.array(dtype=wp.vec2), grad: wp.array(dtype=wp.vec2), lr: float):
    x[0] = x[0] - lr * grad[0]


def simulate(wind, awake, loss):
    angles = np.linspace(0.0, 2.0 * np.pi, N, endpoint=False)
    q = wp.array(np.stack([np.cos(angles), np.sin(angles)], 1), dtype=wp.vec2, requires_grad=True)
    for _step in range(STEPS):
        q_next = wp.empty_like(q)
        wp.launch(copy_array, dim=q.shape, inputs=[q], outputs=[q_next])
        wp.launch(advect_awake, dim=N, inputs=[q, awake, wind, DT], outputs=[q_next])
        q = q_next
    wp.launch(line_loss, dim=N, inputs=[q], outputs=[loss])


def main():
    wind = wp.array([[0.0, 0.5]], dtype=wp.vec2, requires_grad=True)
    awake = wp.array(np.arange(N) % 3 != 0, dtype=int)
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            simulate(wind, awake, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=1, inputs=[wind, wind.grad, 0.01])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
