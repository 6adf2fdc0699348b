"""Fit the drag coefficient of a falling particle to a measured end height. Before training, the
trainer checks its gradient against finite differences with a tape of its own (newton's diffsim
examples do this in `check_grad()`), then trains with `self.tape`, zeroed after every update."""

import numpy as np
import warp as wp

N = 8
STEPS = 5
DT = 0.1


@wp.kernel
def fall(c: wp.array(dtype=float), v0: wp.array(dtype=float), t: float, h: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = v0[i] * t * wp.exp(-c[0] * t) - 0.5 * 9.8 * t * t


@wp.kernel
def misfit(h: wp.array(dtype=float), measured: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = h[i] - measured[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class Trainer:
    def __init__(self):
        rng = np.random.default_rng(4)
        self.c = wp.array([0.3], dtype=float, requires_grad=True)
        self.v0 = wp.array(rng.uniform(4.0, 6.0, N), dtype=float)
        self.measured = wp.array(rng.uniform(-1.0, 1.0, N), dtype=float)
        self.h = wp.zeros(N, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = None

    def forward(self):
        self.loss.zero_()
        wp.launch(fall, dim=N, inputs=[self.c, self.v0, STEPS * DT], outputs=[self.h])
        wp.launch(misfit, dim=N, inputs=[self.h, self.measured], outputs=[self.loss])
        return self.loss

    def check_grad(self, eps=1e-3):
        c = self.c.numpy()[0]
        self.c.assign([c + eps])
        l_plus = self.forward().numpy()[0]
        self.c.assign([c - eps])
        l_minus = self.forward().numpy()[0]
        self.c.assign([c])
        numeric = (l_plus - l_minus) / (2.0 * eps)
        tape = wp.Tape()
        with tape:
            loss = self.forward()
        tape.backward(loss)
        analytic = self.c.grad.numpy()[0]
        print(f"gradient check: numeric {numeric:.4f} analytic {analytic:.4f}")

    def step(self, lr):
        self.tape = wp.Tape()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)
        wp.launch(sgd, dim=1, inputs=[self.c, self.c.grad, lr])
        self.tape.zero()


def main():
    trainer = Trainer()
    trainer.check_grad()
    for it in range(3):
        trainer.step(0.001)
        if it == 0:
            print(f"loss0 = {trainer.loss.numpy()[0]}")
            print(f"forward: h3 = {trainer.h.numpy()[3]}")
    print(f"c = {trainer.c.numpy()[0]}")


if __name__ == "__main__":
    main()
