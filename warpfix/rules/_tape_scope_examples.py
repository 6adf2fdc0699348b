"""Example kernels shared by the WF3xx examples."""

from __future__ import annotations

KERNELS = """
import numpy as np
import warp as wp


@wp.kernel
def predict(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = w[0] * x[i] + w[1]


@wp.kernel
def mse(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d / 32.0)


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    w[i] = w[i] - lr * g[i]


xs = np.linspace(0.0, 1.0, 32)
x = wp.array(xs, dtype=float)
target = wp.array(3.0 * xs + 1.0, dtype=float)
w = wp.zeros(2, dtype=float, requires_grad=True)
y = wp.zeros(32, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""
