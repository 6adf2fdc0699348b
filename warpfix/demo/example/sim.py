"""Particles thrown through air with drag: the simulation half of the demo project."""

import warp as wp

GRAVITY = wp.constant(wp.vec3(0.0, -9.8, 0.0))


@wp.kernel
def apply_drag(v: wp.array(dtype=wp.vec3), damping: float):
    i = wp.tid()
    v[i] *= damping  # air drag, applied in place


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vel = v[i] + dt * GRAVITY
    v_out[i] = vel
    x_out[i] = x[i] + dt * vel


def simulate(x0, v0, steps, dt, damping):
    """Advance `steps` frames; every frame writes fresh buffers."""
    x, v = x0, wp.clone(v0)
    for _ in range(steps):
        wp.launch(apply_drag, dim=len(v), inputs=[v, damping])
        x_next = wp.empty_like(x)
        v_next = wp.empty_like(v)
        wp.launch(integrate, dim=len(x), inputs=[x, v, dt], outputs=[x_next, v_next])
        x, v = x_next, v_next
    return x
