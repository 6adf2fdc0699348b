"""Compact the positive samples of a signal into a dense buffer and fit a weighted sum of their squares.
A @wp.func `reserve()` only counts them; each sample keeps its own slot."""

import numpy as np
import warp as wp


@wp.func
def reserve(counter: wp.array(dtype=int)):
    return wp.atomic_add(counter, 0, 1)


@wp.kernel
def compact(x: wp.array(dtype=float), counter: wp.array(dtype=int), out: wp.array(dtype=float)):
    tid = wp.tid()
    if x[tid] > 0.0:
        reserve(counter)
        out[tid] = x[tid] * x[tid]


@wp.kernel
def total(out: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, out[i] * float(i + 1))


def main():
    x = wp.array(np.linspace(-1.0, 1.0, 8), dtype=float, requires_grad=True)
    for it in range(2):
        counter = wp.zeros(1, dtype=int)
        out = wp.zeros(8, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(compact, dim=8, inputs=[x, counter], outputs=[out])
            wp.launch(total, dim=8, inputs=[out], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"forward: out = {out.numpy().tolist()}")


if __name__ == "__main__":
    main()
