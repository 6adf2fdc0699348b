"""A row of damped oscillators (point masses on springs to their rest points) pushed by a learnable force."""

import numpy as np
import warp as wp

N = 8
SUBSTEPS = 2
DT = 0.1
STIFFNESS = 20.0
DAMPING = 0.8
TARGET = wp.vec2(0.5, -0.25)


@wp.kernel
def oscillate(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    force: wp.array(dtype=wp.vec2),
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    acc = -STIFFNESS * x[i] - DAMPING * v[i] + force[i]
    vel = v[i] + dt * acc
    v_out[i] = vel
    x_out[i] = x[i] + dt * vel


@wp.kernel
def frame_loss(x: wp.array(dtype=wp.vec2), target: wp.vec2, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def accumulate(total: wp.array(dtype=wp.vec2), g: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    total[i] = total[i] + g[i]


@wp.kernel
def sgd_step(x: wp.array(dtype=wp.vec2), grad: wp.array(dtype=wp.vec2), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


class State:
    """Positions and velocities of the oscillators."""

    def __init__(self):
        offsets = np.stack([np.linspace(-1.0, 1.0, N), np.zeros(N)], axis=1)
        self.x = wp.array(offsets, dtype=wp.vec2, requires_grad=True)
        self.v = wp.zeros(N, dtype=wp.vec2, requires_grad=True)


def simulate_frame(states, force, loss):
    """Advance ``states[0]`` through ``states[SUBSTEPS]`` and add the frame's distance to the target to ``loss``."""
    for s in range(SUBSTEPS):
        wp.launch(
            oscillate,
            dim=N,
            inputs=[states[s].x, states[s].v, force, DT],
            outputs=[states[s + 1].x, states[s + 1].v],
        )
    wp.launch(frame_loss, dim=N, inputs=[states[SUBSTEPS].x, TARGET], outputs=[loss])
