"""Example kernels shared by the WF101 and WF102 examples."""

from __future__ import annotations

KERNELS = """
import warp as wp


@wp.kernel
def integrate(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), dt: float, q_new: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    lift = wp.vec3(0.0, wp.sin(q[i][1]), 0.0)  # a height-dependent field: the adjoint needs q
    q_new[i] = q[i] + (v[i] + lift) * dt


@wp.kernel
def floor_contact(q: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = q[i]
    out[i] = wp.vec3(p[0], wp.max(p[1], 0.0), p[2])


@wp.kernel
def loss_kernel(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.length(q[i]))


n = 64
q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
v = wp.ones(n, dtype=wp.vec3, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""
