"""Identify the spring stiffnesses of a hanging mass-spring chain from the shape it settles into."""

import numpy as np
import warp as wp

N = 12
STEPS = 30
DT = 0.01


@wp.kernel
def spring_forces(
    q: wp.array(dtype=wp.vec2), stiffness: wp.array(dtype=float), rest: float, f: wp.array(dtype=wp.vec2)
):
    j = wp.tid()
    d = q[j + 1] - q[j]
    fs = stiffness[j] * (wp.length(d) - rest) * wp.normalize(d)
    wp.atomic_add(f, j, fs)
    wp.atomic_sub(f, j + 1, fs)


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    f: wp.array(dtype=wp.vec2),
    dt: float,
    q_new: wp.array(dtype=wp.vec2),
    v_new: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    vel = 0.98 * v[i] + dt * (f[i] + wp.vec2(0.0, -9.8))
    if i == 0:
        vel = wp.vec2(0.0, 0.0)  # the top mass is pinned
    v_new[i] = vel
    q_new[i] = q[i] + dt * vel


@wp.kernel
def shape_loss(q: wp.array(dtype=wp.vec2), target: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def sgd_step(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def simulate(stiffness, target, loss):
    q = wp.array(np.stack([0.1 * np.arange(N), np.zeros(N)], 1), dtype=wp.vec2, requires_grad=True)
    v = wp.zeros(N, dtype=wp.vec2, requires_grad=True)
    for _step in range(STEPS):
        forces = wp.zeros(N, dtype=wp.vec2, requires_grad=True)
        wp.launch(spring_forces, dim=N - 1, inputs=[q, stiffness, 0.1], outputs=[forces])
        q_new = wp.empty_like(q)
        v_new = wp.empty_like(v)
        wp.launch(integrate, dim=N, inputs=[q, v, forces, DT], outputs=[q_new, v_new])
        q, v = q_new, v_new
    wp.launch(shape_loss, dim=N, inputs=[q, target], outputs=[loss])


def main():
    stiffness = wp.full(N - 1, 200.0, dtype=float, requires_grad=True)
    target = wp.array(np.stack([0.08 * np.arange(N), -0.05 * np.arange(N)], 1), dtype=wp.vec2)
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            loss.zero_()  # zeroing before the first use is fine
            simulate(stiffness, target, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=N - 1, inputs=[stiffness, stiffness.grad, 100.0])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
