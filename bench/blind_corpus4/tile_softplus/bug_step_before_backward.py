"""Softplus regression with tile kernels: y = softplus(x . w + b), trained with gradient accumulation over two
micro-batches per step, host-side gradient-norm clipping, and plain SGD.

Usage: python ok.py [--iters 5] [--lr 0.01] [--clip 2.0]
"""

import argparse

import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True

FEATURES = 16
MICRO = 24


@wp.kernel
def tile_dense(x: wp.array2d(dtype=float), w: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    xi = wp.tile_load(x[i], shape=FEATURES)
    wt = wp.tile_load(w, shape=FEATURES)
    s = wp.tile_sum(wp.tile_map(wp.mul, xi, wt))
    wp.tile_store(z, s, offset=i)


@wp.func
def softplus(u: float):
    return wp.max(u, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(u)))


@wp.kernel
def softplus_mse(
    z: wp.array(dtype=float),
    b: wp.array(dtype=float),
    y: wp.array(dtype=float),
    scale: float,
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    err = softplus(z[i] + b[0]) - y[i]
    wp.atomic_add(loss, 0, err * err * scale)


def make_data(n, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    x[::7] *= 60.0  # a few outliers with very large activations
    w_true = rng.normal(size=FEATURES).astype(np.float32) * 0.4
    y = np.log1p(np.exp(np.clip(x @ w_true + 0.3, -30.0, 30.0)))
    y = np.where(x @ w_true + 0.3 > 30.0, x @ w_true + 0.3, y).astype(np.float32)
    return wp.array(x, dtype=float), wp.array(y, dtype=float)


def allocate():
    stages = [wp.empty((MICRO, FEATURES), dtype=float) for _ in range(2)]
    targets = [wp.empty(MICRO, dtype=float) for _ in range(2)]
    zs = [wp.zeros(MICRO, dtype=float, requires_grad=True) for _ in range(2)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    return stages, targets, zs, loss


def clip_gradients(params, max_norm):
    grads = [p.grad.numpy() for p in params]
    norm = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
    if norm > max_norm:
        for p, g in zip(params, grads):
            p.grad.assign(g * (max_norm / norm))
    return norm


def train(args, x, y, w, b):
    stages, targets, zs, loss = allocate()
    params = [w, b]
    opt = warp.optim.SGD(params, lr=args.lr)
    tape = wp.Tape()
    n_batches = x.shape[0] // MICRO
    history = []
    for it in range(args.iters):
        loss.zero_()
        with tape:
            for k in range(2):
                lo = ((2 * it + k) % n_batches) * MICRO
                wp.copy(stages[k], x[lo : lo + MICRO])
                wp.copy(targets[k], y[lo : lo + MICRO])
                wp.launch_tiled(tile_dense, dim=MICRO, inputs=[stages[k], w], outputs=[zs[k]], block_dim=16)
                wp.launch(softplus_mse, dim=MICRO, inputs=[zs[k], b, targets[k], 0.5 / MICRO], outputs=[loss])
        opt.step([w.grad, b.grad])
        tape.backward(loss)
        value = float(loss.numpy()[0])
        history.append(value)
        print(f"loss {it} {value:.9g}")
        if it == 0:
            print(f"grad w [{' '.join('%.9g' % g for g in w.grad.numpy())}]")
            print(f"grad b [{' '.join('%.9g' % g for g in b.grad.numpy())}]")
        clip_gradients(params, args.clip)
        tape.reset()
    return history


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--clip", type=float, default=2.0)
    args = parser.parse_args(argv)
    with wp.ScopedDevice("cpu"):
        x, y = make_data(8 * MICRO)
        w = wp.array(np.full(FEATURES, 0.5, dtype=np.float32), dtype=float, requires_grad=True)
        b = wp.zeros(1, dtype=float, requires_grad=True)
        train(args, x, y, w, b)


if __name__ == "__main__":
    main()
