"""Buggy (WF301): a function returns the gradient (`return tape.gradients[w]`) that its caller consumes;
nothing zeroes it, so each call's backward adds into the last one's."""

import numpy as np
import warp as wp


@wp.kernel
def predict(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = w[0] * x[i] + w[1]


@wp.kernel
def mse(y: wp.array(dtype=float), t: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - t[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    w[i] = w[i] - lr * g[i]


x = wp.array(np.linspace(0.0, 1.0, 32), dtype=float)
target = wp.array(np.linspace(1.0, 3.0, 32), dtype=float)
w = wp.zeros(2, dtype=float, requires_grad=True)
y = wp.zeros(32, dtype=float, requires_grad=True)


def gradient(w):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    return tape.gradients[w]


for it in range(5):
    g = gradient(w)
    wp.launch(sgd, dim=2, inputs=[w, g, 0.01])
    print(it, w.numpy())
