"""(The helper returns the raw weighted sum; the kernel normalises it.) Weighted pooling of a sampled signal: each output cell is the weighted mean of a window of
samples, computed by a helper @wp.func (fit the weights so the pooled cells match a target)."""

import numpy as np
import warp as wp

CELLS = 4
WINDOW = 6


@wp.func
def weighted_sum(x: wp.array(dtype=float), w: wp.array(dtype=float), start: int, n: int):
    s = float(0.0)
    for j in range(n):
        s += w[start + j] * x[start + j]
    return s


@wp.kernel
def pool(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    i = wp.tid()
    m = weighted_sum(x, w, i * n, n) / float(n)
    out[i] = m


@wp.kernel
def match_loss(out: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = out[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def run(x, w, target, window):
    out = wp.zeros(CELLS, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(pool, dim=CELLS, inputs=[x, w, window], outputs=[out])
        wp.launch(match_loss, dim=CELLS, inputs=[out, target], outputs=[loss])
    tape.backward(loss)
    return tape, out, loss


def main():
    rng = np.random.default_rng(7)
    x = wp.array(rng.uniform(0.0, 1.0, CELLS * WINDOW), dtype=float)
    w = wp.array(rng.uniform(0.5, 1.5, CELLS * WINDOW), dtype=float, requires_grad=True)
    target = wp.array(np.linspace(0.3, 0.7, CELLS), dtype=float)
    for it in range(3):
        tape, out, loss = run(x, w, target, WINDOW)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"forward: pooled = {out.numpy().tolist()}")
        wp.launch(sgd_step, dim=CELLS * WINDOW, inputs=[w, w.grad, 0.5])
        tape.zero()


if __name__ == "__main__":
    main()
