"""Kernels shared by the single-file verify test programs."""

import warp as wp


@wp.kernel
def step(x: wp.array(dtype=float), v: wp.array(dtype=float), k: wp.array(dtype=float),
         x_out: wp.array(dtype=float), v_out: wp.array(dtype=float)):
    i = wp.tid()
    a = -k[i] * x[i] * wp.abs(x[i]) - 0.2 * v[i]
    v_new = v[i] + 0.05 * a
    v_out[i] = v_new
    x_out[i] = x[i] + 0.05 * v_new


@wp.kernel
def sq_loss(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


@wp.kernel
def add_to(acc: wp.array(dtype=float), g: wp.array(dtype=float)):
    i = wp.tid()
    acc[i] = acc[i] + g[i]
