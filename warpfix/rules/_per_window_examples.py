"""Example programs shared by the WF601 examples: the simulation every one of them trains, and the same as
a module (``sim.py``) for the cross-file example."""

from __future__ import annotations

SIM = """
import numpy as np
import warp as wp


@wp.kernel
def step(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), thrust: wp.array(dtype=wp.vec3),
         q_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v_new = v[i] + 0.01 * (thrust[0] + wp.vec3(0.0, -9.8, 0.0))
    v_out[i] = v_new
    q_out[i] = q[i] + 0.01 * v_new


@wp.kernel
def distance(q: wp.array(dtype=wp.vec3), goal: wp.vec3, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.length_sq(q[i] - goal))


@wp.kernel
def accumulate(acc: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    acc[i] = acc[i] + g[i]


@wp.kernel
def sgd(p: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


n, frames, substeps = 8, 4, 8
goal = wp.vec3(1.0, 2.0, 0.0)
thrust = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
grad_sum = wp.zeros(1, dtype=wp.vec3)
"""

SIM_MODULE = """
import warp as wp


@wp.kernel
def step(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), thrust: wp.array(dtype=wp.vec3),
         q_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v_new = v[i] + 0.01 * (thrust[0] + wp.vec3(0.0, -9.8, 0.0))
    v_out[i] = v_new
    q_out[i] = q[i] + 0.01 * v_new


@wp.kernel
def height(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i][1] * q[i][1])


@wp.kernel
def sgd(p: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class State:
    def __init__(self, n):
        self.n = n
        self.q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        self.v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)

    def reset(self):
        self.q = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
        self.v = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)


def simulate(state, thrust, loss):
    q_next = wp.zeros(state.n, dtype=wp.vec3, requires_grad=True)
    v_next = wp.zeros(state.n, dtype=wp.vec3, requires_grad=True)
    wp.launch(step, dim=state.n, inputs=[state.q, state.v, thrust], outputs=[q_next, v_next])
    wp.launch(height, dim=state.n, inputs=[q_next], outputs=[loss])
    state.q = q_next
    state.v = v_next
"""
