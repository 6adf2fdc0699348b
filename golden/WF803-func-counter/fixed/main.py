"""Compact the positive samples of a signal into a dense buffer and fit a weighted sum of their squares.
A @wp.func `reserve()` hands out the output slots with an atomic counter."""

import numpy as np
import warp as wp


@wp.func
def reserve(counter: wp.array(dtype=int)):
    return wp.atomic_add(counter, 0, 1)


@wp.func
def reserve_slot(counter: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    slot = wp.atomic_add(counter, 0, 1)
    slots[tid] = slot
    return slot


@wp.func_replay(reserve_slot)
def replay_reserve_slot(counter: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    return slots[tid]


@wp.kernel
def compact(x: wp.array(dtype=float), counter: wp.array(dtype=int), out: wp.array(dtype=float), slots: wp.array(dtype=int)):
    tid = wp.tid()
    if x[tid] > 0.0:
        slot = reserve_slot(counter, slots, tid)
        out[slot] = x[tid] * x[tid]


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
            slots = wp.zeros(8, dtype=int)
            wp.launch(compact, dim=8, inputs=[x, counter], outputs=[out, slots])
            wp.launch(total, dim=8, inputs=[out], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"forward: out = {out.numpy().tolist()}")


if __name__ == "__main__":
    main()
