"""Fit the spring constant of a damped oscillator to a measured trajectory. The trainer keeps one
tape and records into it in `forward_backward()`, which the training loop calls every iteration."""

import numpy as np
import warp as wp

N = 8
STEPS = 6
DT = 0.1


@wp.kernel
def oscillate(k: wp.array(dtype=float), x0: wp.array(dtype=float), t: float, x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x0[i] * wp.cos(wp.sqrt(k[0]) * t) * wp.exp(-0.1 * t)


@wp.kernel
def misfit(x: wp.array(dtype=float), measured: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - measured[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class Trainer:
    def __init__(self):
        rng = np.random.default_rng(1)
        self.k = wp.array([2.0], dtype=float, requires_grad=True)
        self.x0 = wp.array(rng.uniform(0.5, 1.0, N), dtype=float)
        self.measured = wp.array(rng.uniform(-0.5, 0.5, N), dtype=float)
        self.x = wp.zeros(N, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()

    def forward_backward(self):
        self.loss.zero_()
        with self.tape:
            wp.launch(oscillate, dim=N, inputs=[self.k, self.x0, STEPS * DT], outputs=[self.x])
            wp.launch(misfit, dim=N, inputs=[self.x, self.measured], outputs=[self.loss])
        self.tape.backward(self.loss)

    def step(self, lr):
        self.forward_backward()
        wp.launch(sgd, dim=1, inputs=[self.k, self.k.grad, lr])
        self.tape.zero()


def main():
    trainer = Trainer()
    for it in range(3):
        trainer.step(0.05)
        if it == 0:
            print(f"loss0 = {trainer.loss.numpy()[0]}")
            print(f"forward: x3 = {trainer.x.numpy()[3]}")
    print(f"k = {trainer.k.numpy()[0]}")


if __name__ == "__main__":
    main()
