"""Tune anchor-spring stiffness so that particles released from rest settle at target positions.

The per-step force fields keep their gradients to inspect which forces matter most."""

import numpy as np
import warp as wp

N = 16
STEPS = 30
DT = 0.02


@wp.kernel
def anchor_forces(
    q: wp.array(dtype=wp.vec2), anchor: wp.array(dtype=wp.vec2), k: wp.array(dtype=float), f: wp.array(dtype=wp.vec2)
):
    i = wp.tid()
    d = q[i] - anchor[i]
    # hardening spring: stiffer when stretched further
    f[i] = -k[0] * (1.0 + wp.dot(d, d)) * d + wp.vec2(0.0, -9.8)


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
    vel = 0.95 * v[i] + dt * f[i]
    v_new[i] = vel
    q_new[i] = q[i] + dt * vel


@wp.kernel
def target_loss(q: wp.array(dtype=wp.vec2), target: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def sgd_step(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    x[0] = x[0] - lr * grad[0]


def simulate(k, anchor, target, loss, force_log):
    q = wp.clone(anchor)
    v = wp.zeros(N, dtype=wp.vec2, requires_grad=True)
    for _step in range(STEPS):
        f = wp.zeros(N, dtype=wp.vec2, requires_grad=True, retain_grad=True)
        wp.launch(anchor_forces, dim=N, inputs=[q, anchor, k], outputs=[f])
        q_new = wp.empty_like(q)
        v_new = wp.empty_like(v)
        wp.launch(integrate, dim=N, inputs=[q, v, f, DT], outputs=[q_new, v_new])
        force_log.append(f)
        q, v = q_new, v_new
    wp.launch(target_loss, dim=N, inputs=[q, target], outputs=[loss])


def main():
    k = wp.array([20.0], dtype=float, requires_grad=True)
    xs = np.linspace(-1.0, 1.0, N)
    anchor = wp.array(np.stack([xs, np.zeros(N)], 1), dtype=wp.vec2, requires_grad=True)
    target = wp.array(np.stack([xs, np.full(N, -0.35)], 1), dtype=wp.vec2)
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        force_log = []
        with tape:
            simulate(k, anchor, target, loss, force_log)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"max |dloss/df_0| = {np.abs(force_log[0].grad.numpy()).max():.5f}")
        wp.launch(sgd_step, dim=1, inputs=[k, k.grad, 20.0])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
