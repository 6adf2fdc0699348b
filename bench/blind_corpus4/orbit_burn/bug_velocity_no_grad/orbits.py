"""Planar satellites around a point mass, driven by a per-step thrust schedule.

The thrust is made momentum-free across the formation (zero mean over satellites at every step) by a host-side
projection that is recorded on the tape with Tape.record_func and its own backward.
"""

from types import SimpleNamespace

import numpy as np
import warp as wp

MU = 1.0
SOFT = 1e-3


@wp.kernel
def gravity_step(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    thrust: wp.array(dtype=wp.vec2),
    t: int,
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    n = x.shape[0]
    r = x[i]
    d2 = wp.dot(r, r) + SOFT
    a = -MU * r / (d2 * wp.sqrt(d2)) + thrust[t * n + i]
    v_new = v[i] + a * dt
    v_out[i] = v_new
    x_out[i] = r + v_new * dt


@wp.kernel
def radius_cost(x: wp.array(dtype=wp.vec2), r_target: wp.array(dtype=float), weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    e = wp.length(x[i]) - r_target[i]
    wp.atomic_add(loss, 0, weight * e * e)


@wp.kernel
def fuel_cost(u: wp.array(dtype=wp.vec2), weight: float, loss: wp.array(dtype=float)):
    k = wp.tid()
    wp.atomic_add(loss, 0, weight * wp.dot(u[k], u[k]))


def make_model(n=6, windows=3, steps_per_window=20, dt=0.04):
    radii = np.linspace(1.0, 1.5, n).astype(np.float32)
    phase = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
    x0 = np.stack([radii * np.cos(phase), radii * np.sin(phase)], 1)
    speed = np.sqrt(MU / radii)
    v0 = np.stack([-speed * np.sin(phase), speed * np.cos(phase)], 1)
    r_target = radii + np.linspace(0.3, -0.2, n)
    return SimpleNamespace(
        n=n,
        windows=windows,
        steps_per_window=steps_per_window,
        steps=windows * steps_per_window,
        dt=dt,
        x0=wp.array(x0.astype(np.float32), dtype=wp.vec2),
        v0=wp.array(v0.astype(np.float32), dtype=wp.vec2),
        r_target=wp.array(r_target.astype(np.float32), dtype=float),
    )


def allocate(model):
    xs = [wp.zeros(model.n, dtype=wp.vec2, requires_grad=True) for _ in range(model.steps + 1)]
    vs = [wp.zeros(model.n, dtype=wp.vec2) for _ in range(model.steps + 1)]
    centered = wp.zeros(model.steps * model.n, dtype=wp.vec2, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    return xs, vs, centered, loss


def center_thrust(tape, model, thrust, centered):
    """centered[t, i] = thrust[t, i] - mean_i thrust[t, i], computed on the host and taped by hand."""
    u = thrust.numpy().reshape(model.steps, model.n, 2)
    centered.assign((u - u.mean(axis=1, keepdims=True)).reshape(-1, 2))

    def backward():
        g = centered.grad.numpy().reshape(model.steps, model.n, 2)
        g = g - g.mean(axis=1, keepdims=True)
        thrust.grad.assign(thrust.grad.numpy() + g.reshape(-1, 2))

    tape.record_func(backward, arrays=[thrust, centered])


def start(model, bufs):
    xs, vs, _, _ = bufs
    wp.copy(xs[0], model.x0)
    wp.copy(vs[0], model.v0)


def run_window(model, bufs, w):
    xs, vs, centered, _ = bufs
    t0 = w * model.steps_per_window
    for t in range(t0, t0 + model.steps_per_window):
        wp.launch(
            gravity_step,
            dim=model.n,
            inputs=[xs[t], vs[t], centered, t, model.dt],
            outputs=[xs[t + 1], vs[t + 1]],
        )
    return t0 + model.steps_per_window
