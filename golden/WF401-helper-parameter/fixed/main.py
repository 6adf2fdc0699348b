"""Calibrate the air-drag factor of thrown particles so that they land on observed positions.
The drag is applied by a helper, `damp(v, k)`, that updates its parameter's array in place."""

import numpy as np
import warp as wp

N = 16
STEPS = 10
DT = 0.05


@wp.kernel
def apply_drag(v: wp.array(dtype=wp.vec3), k: wp.array(dtype=float), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v_out[i] = v[i] * k[0]


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    dt: float,
    x_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vel = v[i] + dt * wp.vec3(0.0, -9.8, 0.0)
    v_new[i] = vel
    x_new[i] = x[i] + dt * vel


@wp.kernel
def distance_loss(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def damp(v, k):
    v_out = wp.empty_like(v)
    wp.launch(apply_drag, dim=N, inputs=[v, k], outputs=[v_out])
    v = v_out
    return v


def forward(k, x0, v0, target, loss):
    x = x0
    v = wp.clone(v0)
    for _step in range(STEPS):
        v = damp(v, k)
        x_new = wp.empty_like(x)
        v_new = wp.empty_like(v)
        wp.launch(integrate, dim=N, inputs=[x, v, DT], outputs=[x_new, v_new])
        x = x_new
        v = v_new
    wp.launch(distance_loss, dim=N, inputs=[x, target], outputs=[loss])


def setup():
    rng = np.random.default_rng(1)
    x0 = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
    v0 = wp.array(rng.uniform(1.0, 4.0, (N, 3)), dtype=wp.vec3, requires_grad=True)
    target = wp.array(rng.uniform(0.5, 2.0, (N, 3)), dtype=wp.vec3)
    k = wp.array([0.7], dtype=float, requires_grad=True)
    return k, (x0, v0, target)


def main():
    k, (x0, v0, target) = setup()
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(k, x0, v0, target, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=1, inputs=[k, k.grad, 1.0e-4])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
