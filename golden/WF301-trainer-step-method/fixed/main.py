"""Fit the stiffness of a chain of damped springs to a measured end position. The trainer splits one
iteration into `forward()`, `backward()` and `step()`, which the training loop calls in turn (the shape of
newton's diffsim trainers); `step()` applies the update."""

import numpy as np
import warp as wp

N = 8
STEPS = 5
DT = 0.1


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), k: wp.array(dtype=float),
              x_out: wp.array(dtype=float), v_out: wp.array(dtype=float)):
    i = wp.tid()
    v_new = v[i] - DT * (k[i] * x[i] + 0.2 * v[i])
    v_out[i] = v_new
    x_out[i] = x[i] + DT * v_new


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
        rng = np.random.default_rng(3)
        self.k = wp.array(rng.uniform(1.0, 2.0, N), dtype=float, requires_grad=True)
        self.measured = wp.array(rng.uniform(-0.2, 0.2, N), dtype=float)
        self.xs = [wp.array(np.linspace(0.5, 1.0, N), dtype=float, requires_grad=True)]
        self.xs += [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS)]
        self.vs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = None

    def forward(self):
        self.loss.zero_()
        self.tape = wp.Tape()
        with self.tape:
            for t in range(STEPS):
                wp.launch(integrate, dim=N, inputs=[self.xs[t], self.vs[t], self.k],
                          outputs=[self.xs[t + 1], self.vs[t + 1]])
            wp.launch(misfit, dim=N, inputs=[self.xs[-1], self.measured], outputs=[self.loss])

    def backward(self):
        self.tape.backward(self.loss)

    def step(self, lr):
        wp.launch(sgd, dim=N, inputs=[self.k, self.k.grad, lr])
        self.tape.zero()


def main():
    trainer = Trainer()
    for it in range(3):
        trainer.forward()
        trainer.backward()
        if it == 0:
            print(f"loss0 = {trainer.loss.numpy()[0]}")
        trainer.step(0.5)
    print(f"k = {trainer.k.numpy()}")


if __name__ == "__main__":
    main()
