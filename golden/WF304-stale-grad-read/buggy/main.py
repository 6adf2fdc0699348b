"""Aim a spray of particles with quadratic drag at a target: optimise the launch velocity v0."""

import numpy as np
import warp as wp

N = 16
STEPS = 10
DT = 0.05
DRAG = 0.4
TARGET = wp.vec3(3.0, 0.0, 0.0)


@wp.kernel
def spread_velocity(v0: wp.array(dtype=wp.vec3), spread: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v[i] = v0[0] + spread[i]


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    dt: float,
    drag: float,
    q_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vel = v[i]
    # gravity and quadratic air drag
    acc = wp.vec3(0.0, -9.8, 0.0) - drag * wp.length(vel) * vel
    vel = vel + dt * acc
    v_new[i] = vel
    q_new[i] = q[i] + dt * vel


@wp.kernel
def target_loss(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target
    wp.atomic_add(loss, 0, wp.dot(d, d) / float(q.shape[0]))


@wp.kernel
def sgd_step(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def simulate(v0, spread, v_start, loss):
    """Throw N particles with velocity v0 + spread[i] and score their positions after STEPS steps."""
    wp.launch(spread_velocity, dim=N, inputs=[v0, spread], outputs=[v_start])
    q = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
    v = v_start
    for _ in range(STEPS):
        q_new = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
        v_new = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
        wp.launch(integrate, dim=N, inputs=[q, v, DT, DRAG], outputs=[q_new, v_new])
        q, v = q_new, v_new
    wp.launch(target_loss, dim=N, inputs=[q, TARGET], outputs=[loss])
    return q


def make_problem():
    rng = np.random.default_rng(0)
    spread = wp.array(0.1 * rng.standard_normal((N, 3)), dtype=wp.vec3)
    v0 = wp.array([[2.0, 4.0, 0.0]], dtype=wp.vec3, requires_grad=True)
    return v0, spread


def main():
    v0, spread = make_problem()
    v_start = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            simulate(v0, spread, v_start, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        print(f"iter {it}: loss = {loss.numpy()[0]:.4f}  dloss/dv0 = {v0.grad.numpy()[0]}")
        tape.zero()
        wp.launch(sgd_step, dim=1, inputs=[v0, v0.grad, 0.02])


if __name__ == "__main__":
    main()
