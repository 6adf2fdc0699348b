"""Fit p so that sum((2 p)^2) is minimal, through an intermediate `b`. `--bug` allocates `b` without
requires_grad: the chain p -> b -> loss is cut there and p gets a zero gradient. `--detached` computes a
metric from p into buffers without gradients that never reach the loss (correct: nothing to report).
`--custom` copies the intermediate on through a scratch buffer without a gradient by launches the tape does
not record (``record_tape=False``) under a hand-written adjoint (``tape.record_func``), as warp's
fluid_checkpoint_custom_backward solver does: no recorded operation is cut (correct). `--copied` passes `b` on
to the loss through ``wp.copy(c, b)`` into `c`, which has a gradient, as warp's navier_stokes example copies
each step's last stage on: with `--bug` Warp leaves that copy off the tape (its source has no gradient), and
the chain is cut at `b` all the same."""

import sys

import numpy as np
import warp as wp

N = 8


@wp.kernel
def double(p: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = 2.0 * p[i]


@wp.kernel
def total(b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, b[i] * b[i])


@wp.kernel
def copy1(a: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i]


@wp.kernel
def add_adjoint(b_grad: wp.array(dtype=float), a_grad: wp.array(dtype=float)):
    i = wp.tid()
    a_grad[i] += b_grad[i]


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main(bug: bool, detached: bool, custom: bool, copied: bool):
    p = wp.array(np.linspace(1.0, 2.0, N), dtype=float, requires_grad=True)
    scratch = wp.zeros(N, dtype=float)
    for it in range(3):
        b = wp.zeros(N, dtype=float, requires_grad=not bug)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        metric = wp.zeros(N, dtype=float)
        metric_total = wp.zeros(1, dtype=float)
        tape = wp.Tape()
        with tape:
            if custom:
                b0 = wp.zeros(N, dtype=float, requires_grad=True)
                wp.launch(double, dim=N, inputs=[p], outputs=[b0])
                wp.launch(copy1, dim=N, inputs=[b0], outputs=[scratch], record_tape=False)
                wp.launch(copy1, dim=N, inputs=[scratch], outputs=[b], record_tape=False)
                tape.record_func(lambda b=b, b0=b0: wp.launch(add_adjoint, dim=N, inputs=[b.grad], outputs=[b0.grad],
                                                              record_tape=False), arrays=[b0, b])
            else:
                wp.launch(double, dim=N, inputs=[p], outputs=[b])
            if copied:
                c = wp.zeros(N, dtype=float, requires_grad=True)
                wp.copy(c, b)
                wp.launch(total, dim=N, inputs=[c], outputs=[loss])
            else:
                wp.launch(total, dim=N, inputs=[b], outputs=[loss])
            if detached:
                wp.launch(double, dim=N, inputs=[p], outputs=[metric])
                wp.launch(total, dim=N, inputs=[metric], outputs=[metric_total])
        tape.backward(loss)
        print(f"iter {it}: loss = {loss.numpy()[0]:.6f}")
        wp.launch(sgd, dim=N, inputs=[p, p.grad, 0.01])
        tape.zero()


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        main(*(f"--{flag}" in sys.argv for flag in ("bug", "detached", "custom", "copied")))
