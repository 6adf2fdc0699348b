"""Fit the initial velocities of balls dropped onto the floor so that they end at target heights.

Positions and velocities travel together in a ``@wp.struct``."""

import numpy as np
import warp as wp

N = 32
STEPS = 30
DT = 0.02


@wp.struct
class Balls:
    q: wp.array(dtype=float)
    v: wp.array(dtype=float)


@wp.kernel
def integrate(s: Balls, drag: float, dt: float, out: Balls):
    i = wp.tid()
    vel = s.v[i] - dt * (9.8 + drag * s.v[i] * wp.abs(s.v[i]))
    out.v[i] = vel
    out.q[i] = s.q[i] + dt * vel


@wp.kernel
def floor_contact(s: Balls):
    i = wp.tid()
    if s.q[i] < 0.0:
        s.q[i] = 0.0


@wp.kernel
def target_loss(s: Balls, target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = s.q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def make_balls(q, v):
    b = Balls()
    b.q = q
    b.v = v
    return b


def simulate(v0, target, loss):
    s = make_balls(wp.full(N, 0.5, dtype=float, requires_grad=True), v0)
    for _step in range(STEPS):
        nxt = make_balls(wp.empty_like(s.q), wp.empty_like(s.v))
        wp.launch(integrate, dim=N, inputs=[s, 0.1, DT], outputs=[nxt])
        wp.launch(floor_contact, dim=N, inputs=[nxt])
        s = nxt
    wp.launch(target_loss, dim=N, inputs=[s, target], outputs=[loss])


def main():
    v0 = wp.array(np.linspace(-2.0, 3.0, N), dtype=float, requires_grad=True)
    target = wp.array(np.linspace(0.0, 0.6, N), dtype=float)
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
