"""A reader launch reads a copy of `x` (`wp.clone`), and `x` is reset after it on the tape. The copy's
adjoint never reads `x`'s values, so nothing the backward needs changed (`--bug`: the reader reads `x`
itself, whose contents the reset then changes under its adjoint)."""

import sys

import warp as wp

wp.config.quiet = True


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


theta = wp.array([0.5, 1.0, 1.5, 2.0], dtype=float, requires_grad=True)
x = wp.zeros(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.copy(x, theta)
    wp.launch(square, dim=4, inputs=[x if "--bug" in sys.argv else wp.clone(x)], outputs=[y])
    x.zero_()
    wp.launch(total, dim=4, inputs=[y], outputs=[loss])
tape.backward(loss)
print("loss0 =", loss.numpy()[0])
