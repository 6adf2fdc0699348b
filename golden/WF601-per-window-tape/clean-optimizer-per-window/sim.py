"""A spray of particles with quadratic drag pushed by a constant, learnable wind."""

import numpy as np
import warp as wp

N = 16
SUBSTEPS = 5
DT = 0.05
DRAG = 0.4
TARGET = wp.vec3(3.0, 0.0, 0.0)


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    wind: wp.array(dtype=wp.vec3),
    dt: float,
    drag: float,
    q_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vel = v[i]
    acc = wp.vec3(0.0, -9.8, 0.0) + wind[0] - drag * wp.length(vel) * vel
    vel = vel + dt * acc
    v_new[i] = vel
    q_new[i] = q[i] + dt * vel


@wp.kernel
def target_loss(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target
    wp.atomic_add(loss, 0, wp.dot(d, d) / float(q.shape[0]))


@wp.kernel
def accumulate(total: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    total[i] = total[i] + g[i]


@wp.kernel
def sgd_step(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


class State:
    """Positions and velocities at the start of a throw."""

    def __init__(self):
        rng = np.random.default_rng(0)
        velocities = np.array([2.0, 4.0, 0.0]) + 0.1 * rng.standard_normal((N, 3))
        self.q = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
        self.v = wp.array(velocities, dtype=wp.vec3, requires_grad=True)


def simulate_frame(state, wind, loss):
    """Advance one frame (SUBSTEPS steps) and add the frame's distance to the target to ``loss``."""
    for _ in range(SUBSTEPS):
        q_new = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
        v_new = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
        wp.launch(integrate, dim=N, inputs=[state.q, state.v, wind, DT, DRAG], outputs=[q_new, v_new])
        state.q = q_new
        state.v = v_new
    wp.launch(target_loss, dim=N, inputs=[state.q, TARGET], outputs=[loss])
