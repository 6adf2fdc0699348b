"""Aim a spray of particles at a target ring; every iteration also renders the final frame.

The renderer works on flat float buffers, so it looks at the particle positions through a zero-copy view."""

import numpy as np
import warp as wp

N = 24
STEPS = 15
DT = 0.03


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    dt: float,
    q_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vel = v[i] + dt * (wp.vec3(0.0, -9.8, 0.0) - 0.3 * wp.length(v[i]) * v[i])
    v_new[i] = vel
    q_new[i] = q[i] + dt * vel


@wp.kernel
def ring_loss(q: wp.array(dtype=wp.vec3), radius: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    r = wp.length(wp.vec2(q[i][0], q[i][2])) - radius
    wp.atomic_add(loss, 0, r * r + q[i][1] * q[i][1])


@wp.kernel
def to_pixels(xyz: wp.array(dtype=float), scale: float):
    i = wp.tid()
    xyz[i] = xyz[i] * scale + 256.0


@wp.kernel
def sgd_step(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def simulate(v0, loss):
    q = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
    v = v0
    for _step in range(STEPS):
        q_new = wp.empty_like(q)
        v_new = wp.empty_like(v)
        wp.launch(integrate, dim=N, inputs=[q, v, DT], outputs=[q_new, v_new])
        q, v = q_new, v_new
    wp.launch(ring_loss, dim=N, inputs=[q, 1.0], outputs=[loss])
    return q


def render(q):
    pixels = wp.array(ptr=q.ptr, shape=(3 * N,), dtype=float, device=q.device)
    wp.launch(to_pixels, dim=3 * N, inputs=[pixels, 100.0])
    return pixels.numpy()


def main():
    angles = np.linspace(0.0, 2.0 * np.pi, N, endpoint=False)
    v0 = wp.array(np.stack([np.cos(angles), np.full(N, 4.0), np.sin(angles)], 1), dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            q_final = simulate(v0, loss)
        frame = render(q_final)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"frame pixel range = {frame.min():.1f} .. {frame.max():.1f}")
        wp.launch(sgd_step, dim=N, inputs=[v0, v0.grad, 0.01])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
