"""Throw particles tethered to the origin so that they land on targets: optimise launch velocities."""

import numpy as np
import warp as wp

from constraints import project_floor

N = 8
STEPS = 12
DT = 0.05


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    stiffness: float,
    dt: float,
    q_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    p = q[i]
    # elastic tether of rest length 1 to the origin, plus gravity
    r = wp.length(p)
    f = -stiffness * (r - 1.0) * wp.normalize(p) + wp.vec3(0.0, -9.8, 0.0)
    vel = v[i] + dt * f
    v_new[i] = vel
    q_new[i] = p + dt * vel


@wp.kernel
def distance_loss(q: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def sgd_step(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


class State:
    def __init__(self, q0, v0):
        self.q = wp.clone(q0)
        self.v = v0


def simulate(q0, v0, target, loss):
    state = State(q0, v0)
    for _step in range(STEPS):
        q_pred = wp.empty_like(state.q)
        v_next = wp.empty_like(state.v)
        wp.launch(integrate, dim=N, inputs=[state.q, state.v, 40.0, DT], outputs=[q_pred, v_next])
        project_floor(state, q_pred)
        state.v = v_next
    wp.launch(distance_loss, dim=N, inputs=[state.q, target], outputs=[loss])


def main():
    rng = np.random.default_rng(0)
    angles = np.linspace(0.3, 2.8, N)
    q0 = wp.array(np.stack([np.cos(angles), np.sin(angles), np.zeros(N)], 1), dtype=wp.vec3, requires_grad=True)
    v0 = wp.array(rng.normal(0.0, 1.0, (N, 3)), dtype=wp.vec3, requires_grad=True)
    target = wp.array(np.stack([1.5 * np.cos(angles), np.full(N, 0.2), np.zeros(N)], 1), dtype=wp.vec3)
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            simulate(q0, v0, target, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=N, inputs=[v0, v0.grad, 0.01])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
