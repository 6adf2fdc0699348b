"""Aim ballistic shots: optimise launch velocities so that the shots, which cannot go below the
ground plane, are at the target positions after a fixed flight time."""

import numpy as np
import warp as wp

N = 32
T = 0.8
G = 9.8


@wp.kernel
def flight(v0: wp.array(dtype=wp.vec3), t: float, pos: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v = v0[i]
    p = wp.vec3(0.0)
    p[0] = v[0] * t
    p[1] = v[1] * t - 0.5 * G * t * t
    p[2] = v[2] * t
    p[1] = wp.max(p[1], 0.0)
    pos[i] = p


@wp.kernel
def distance_loss(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def sgd_step(p: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def forward(v0, target, loss):
    pos = wp.empty(N, dtype=wp.vec3, requires_grad=True)
    wp.launch(flight, dim=N, inputs=[v0, T], outputs=[pos])
    wp.launch(distance_loss, dim=N, inputs=[pos, target], outputs=[loss])


def setup():
    rng = np.random.default_rng(2)
    v0 = wp.array(rng.uniform(2.0, 8.0, (N, 3)), dtype=wp.vec3, requires_grad=True)
    target = wp.array(rng.uniform(1.0, 4.0, (N, 3)), dtype=wp.vec3)
    return v0, (target,)


def main():
    v0, (target,) = setup()
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(v0, target, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=N, inputs=[v0, v0.grad, 0.01])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
