"""Tune the base growth rates of a population model (the logistic map, chaotic near r = 3.9) so that
the population after many generations sums to a target. The trainer keeps the per-cell rates in a
buffer allocated once in __init__; the rates are computed from the base rates on the tape each step."""

import numpy as np
import warp as wp

N = 8
STEPS = 120


@wp.kernel
def rates(base: wp.array(dtype=float), spread: float, r: wp.array(dtype=float)):
    i = wp.tid()
    r[i] = base[i] + spread * float(i)


@wp.kernel
def logistic(x: wp.array(dtype=float), r: wp.array(dtype=float), x_out: wp.array(dtype=float)):
    i = wp.tid()
    x_out[i] = r[i] * x[i] * (1.0 - x[i])


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class Trainer:
    def __init__(self):
        self.base = wp.array(np.full(N, 3.88, dtype=np.float32), requires_grad=True)
        self.r = wp.zeros(N, dtype=float)
        self.tape = wp.Tape()

    def step(self):
        xs = [wp.array(np.linspace(0.2, 0.7, N).astype(np.float32), requires_grad=True)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with self.tape:
            wp.launch(rates, dim=N, inputs=[self.base, 0.002], outputs=[self.r])
            for _ in range(STEPS):
                xs.append(wp.empty_like(xs[-1]))
                wp.launch(logistic, dim=N, inputs=[xs[-2], self.r], outputs=[xs[-1]])
            wp.launch(total, dim=N, inputs=[xs[-1], loss])
        self.tape.backward(loss)
        wp.launch(sgd, dim=N, inputs=[self.base, self.base.grad, 1e-6])
        self.tape.zero()
        self.tape.reset()
        return loss


def main():
    trainer = Trainer()
    for it in range(3):
        loss = trainer.step()
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")


if __name__ == "__main__":
    main()
