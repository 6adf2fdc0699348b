"""Fit the launch speeds of balls thrown up in a room with a low ceiling so that they end at target heights."""

import numpy as np
import warp as wp

N = 32
STEPS = 25
DT = 0.02
CEILING = 1.0


@wp.kernel
def ballistic_step(
    q: wp.array(dtype=float),
    v: wp.array(dtype=float),
    drag: float,
    dt: float,
    ceiling: float,
    q_new: wp.array(dtype=float),
    v_new: wp.array(dtype=float),
):
    i = wp.tid()
    vel = v[i] - dt * (9.8 + drag * v[i] * wp.abs(v[i]))
    v_new[i] = vel
    q_new[i] = wp.min(q[i] + dt * vel, ceiling)


@wp.kernel
def target_loss(q: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def simulate(v0, target, loss):
    q = wp.zeros(N, dtype=float, requires_grad=True)
    v = v0
    for _step in range(STEPS):
        q_next = wp.empty_like(q)
        v_next = wp.empty_like(v)
        wp.launch(ballistic_step, dim=N, inputs=[q, v, 0.1, DT, CEILING], outputs=[q_next, v_next])
        q, v = q_next, v_next
    wp.launch(target_loss, dim=N, inputs=[q, target], outputs=[loss])


def main():
    v0 = wp.array(np.linspace(2.0, 8.0, N), dtype=float, requires_grad=True)
    target = wp.array(np.linspace(0.2, 0.9, N), dtype=float)
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            simulate(v0, target, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=N, inputs=[v0, v0.grad, 0.05])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
