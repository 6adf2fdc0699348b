"""Correct, and shaped like warp.fem / warp.optim code: inside the iteration, buffers are written by a
native scan, by a prepared launch (``record_cmd=True``), through a ``ptr=`` view of a temporary that
the program frees before the backward, and through views of a pooled buffer lent twice (zeroed by its
owner in between, outside any launch the probe traces). FD replays must reproduce all of it.

    python library_buffers.py [scan|prepared|freed-view|pooled]   (default: all four)
"""

import sys

import numpy as np
import warp as wp

N = 32
MODES = sys.argv[1:] or ["scan", "prepared", "freed-view", "pooled"]
POOL: list[wp.array] = []  # a buffer a library lends out as views (warp.fem's TemporaryStore)


@wp.kernel
def ones(a: wp.array(dtype=int)):
    a[wp.tid()] = 1


@wp.kernel
def weights_from_offsets(offsets: wp.array(dtype=int), w: wp.array(dtype=float)):
    i = wp.tid()
    w[i] = 0.1 * float(offsets[i])


@wp.kernel
def fill_weights(w: wp.array(dtype=float), scale: float):
    i = wp.tid()
    w[i] = scale * float(i + 1)


@wp.kernel
def shifted(src: wp.array(dtype=float), scale: float, dst: wp.array(dtype=float)):
    i = wp.tid()
    dst[i] = src[i] + scale * float(i + 1)


def lend(pool: wp.array) -> wp.array:
    return wp.array(ptr=pool.ptr, dtype=float, shape=(N,), device=pool.device)


@wp.kernel
def weighted(x: wp.array(dtype=float), w: wp.array(dtype=float), c: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * w[i] * c[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()] * y[wp.tid()])


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def weights(mode: str, w: wp.array, counts: wp.array, offsets: wp.array) -> wp.array:
    """Constant weights into persistent buffers, computed the way libraries do it (not on the tape)."""
    w.zero_()
    if mode == "scan":
        wp.launch(ones, dim=N, inputs=[counts])
        offsets.zero_()
        wp.utils.array_scan(counts, offsets, inclusive=True)
        wp.launch(weights_from_offsets, dim=N, inputs=[offsets, w])
    elif mode == "prepared":
        cmd = wp.launch(fill_weights, dim=N, inputs=[w, 0.05], record_cmd=True)
        cmd.launch()
    elif mode == "pooled":  # lent, written, zeroed by the pool's owner, lent again and read
        if not POOL:
            POOL.append(wp.zeros(N, dtype=float))
        wp.launch(fill_weights, dim=N, inputs=[lend(POOL[0]), 0.03])
        POOL[0].zero_()
        wp.launch(shifted, dim=N, inputs=[lend(POOL[0]), 0.05, w])
    else:  # a view over a temporary's memory, the temporary freed (fem's release())
        tmp = wp.empty(N, dtype=float)
        view = wp.array(ptr=tmp.ptr, dtype=float, shape=(N,), device=tmp.device)
        wp.launch(fill_weights, dim=N, inputs=[view, 0.07])
        wp.copy(w, view)
        del tmp  # frees the memory the view shows; the next allocation of this size may get it
    return w


def main():
    x = wp.array(np.linspace(0.1, 1.0, N).astype(np.float32), requires_grad=True)
    w, counts, offsets = wp.empty(N, dtype=float), wp.empty(N, dtype=int), wp.empty(N, dtype=int)
    tape = wp.Tape()
    for it in range(2):
        for mode in MODES:
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            with tape:
                for _ in range(2):  # the second time, the buffers are ones the window already holds
                    weights(mode, w, counts, offsets)
                    c = wp.array(np.full(N, 2.0, dtype=np.float32))  # set from the host: no launch writes it
                    y = wp.empty(N, dtype=float, requires_grad=True)
                    wp.launch(weighted, dim=N, inputs=[x, w, c], outputs=[y])
                    wp.launch(total, dim=N, inputs=[y], outputs=[loss])
            tape.backward(loss)
            if it == 0:
                print(f"loss0 {mode} = {loss.numpy()[0]}")
            wp.launch(sgd, dim=N, inputs=[x, x.grad, 0.01])
            tape.zero()
            tape.reset()


if __name__ == "__main__":
    main()
