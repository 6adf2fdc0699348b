"""A class trainer whose update goes through NumPy (`g = x.grad.numpy()`, `wp.array(g * s)`, then an SGD
launch) and whose tape object is re-entered every step. ``--reset`` calls ``tape.reset()`` first (correct);
without it the tape records on top of the last iteration and the second gradient is twice the first."""

import sys

import numpy as np
import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i] * 0.5)


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


class Trainer:
    def __init__(self, reset: bool):
        self.x = wp.array(np.linspace(0.5, 2.0, 8), dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()
        self.reset = reset

    def step(self):
        if self.reset:
            self.tape.reset()
        with self.tape:
            self.loss.zero_()
            wp.launch(square, dim=8, inputs=[self.x], outputs=[self.loss])
        self.tape.backward(self.loss)
        grad = self.x.grad.numpy().copy()
        scale = 1.0 / max(float(np.linalg.norm(grad)), 1e-6)
        step = wp.array(grad * scale, dtype=float)
        wp.launch(sgd, dim=8, inputs=[self.x, step, 0.1])
        self.tape.zero()


trainer = Trainer(reset="--reset" in sys.argv)
for _ in range(3):
    trainer.step()
    print(f"loss = {trainer.loss.numpy()[0]:.6f}")
