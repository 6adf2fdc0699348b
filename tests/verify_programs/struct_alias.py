"""Parameters held in a @wp.struct, and a buggy write through a `ptr=` alias of a recorded array
between the tape and its backward (WF108/WF902). `--fixed` writes after the backward instead."""

import sys

import numpy as np
import warp as wp

N = 16


@wp.struct
class Model:
    k: wp.array(dtype=float)
    damping: float


@wp.kernel
def step(model: Model, x: wp.array(dtype=float), x_out: wp.array(dtype=float)):
    i = wp.tid()
    x_out[i] = x[i] - 0.1 * model.k[i] * x[i] * x[i] * model.damping


@wp.kernel
def sq_loss(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main():
    fixed = "--fixed" in sys.argv
    model = Model()
    model.k = wp.array(np.linspace(0.5, 1.5, N).astype(np.float32), requires_grad=True)
    model.damping = 0.9
    for it in range(3):
        x0 = wp.array(np.linspace(0.2, 1.0, N).astype(np.float32), requires_grad=True)
        x1 = wp.empty_like(x0)
        x2 = wp.empty_like(x0)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, dim=N, inputs=[model, x0], outputs=[x1])
            wp.launch(step, dim=N, inputs=[model, x1], outputs=[x2])
            wp.launch(sq_loss, dim=N, inputs=[x2], outputs=[loss])
        view = wp.array(ptr=x1.ptr, dtype=float, shape=(N,), device=x1.device)
        if not fixed:
            view.fill_(0.0)  # clears the recorded intermediate through an alias, before backward
        tape.backward(loss)
        if fixed:
            view.fill_(0.0)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd, dim=N, inputs=[model.k, model.k.grad, 0.05])
        tape.zero()


if __name__ == "__main__":
    main()
