"""Logistic growth of a 1D population field with a source term, fitted to a reference run.

One helper allocates the per-step buffers; it is called twice: for the reference run (no
gradients) and for the trained rollout."""

import numpy as np
import warp as wp

N = 16
STEPS = 5
DT = 0.2


@wp.kernel
def spread(x: wp.array(dtype=float), source: wp.array(dtype=float), mid: wp.array(dtype=float)):
    i = wp.tid()
    left = x[wp.max(i - 1, 0)]
    right = x[wp.min(i + 1, N - 1)]
    mid[i] = x[i] + DT * (0.5 * (left + right - 2.0 * x[i]) + source[i] * (1.0 - x[i]))


@wp.kernel
def grow(mid: wp.array(dtype=float), rate: wp.array(dtype=float), x_new: wp.array(dtype=float)):
    i = wp.tid()
    c = mid[i]
    x_new[i] = c + DT * rate[i] * c * (1.0 - c)


@wp.kernel
def misfit(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    r = x[i] - target[i]
    wp.atomic_add(loss, 0, r * r)


def buffers(requires_grad):
    xs = [wp.zeros(N, dtype=float, requires_grad=requires_grad) for _ in range(STEPS + 1)]
    mids = [wp.zeros(N, dtype=float, requires_grad=requires_grad) for _ in range(STEPS)]
    rates = [wp.full(N, 1.5, dtype=float)] * STEPS  # one read-only array in every slot: benign
    return xs, mids, rates


def rollout(xs, mids, rates, source):
    for t in range(STEPS):
        wp.launch(spread, dim=N, inputs=[xs[t], source], outputs=[mids[t]])
        wp.launch(grow, dim=N, inputs=[mids[t], rates[t]], outputs=[xs[t + 1]])


def reference():
    source = wp.array(np.linspace(0.05, 0.4, N).astype(np.float32), dtype=float)
    xs, mids, rates = buffers(requires_grad=False)
    rollout(xs, mids, rates, source)
    return wp.clone(xs[-1])


def main(iterations=3):
    target = reference()
    source = wp.array(np.linspace(0.3, 0.1, N).astype(np.float32), dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    xs, mids, rates = buffers(requires_grad=True)
    tape = wp.Tape()
    for it in range(iterations):
        tape.reset()
        loss.zero_()
        with tape:
            rollout(xs, mids, rates, source)
            wp.launch(misfit, dim=N, inputs=[xs[-1], target], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"forward: final = {xs[-1].numpy().tolist()}")
            print(f"grad0 = {source.grad.numpy().tolist()}")
        source.assign(source.numpy() - 0.5 * source.grad.numpy())


if __name__ == "__main__":
    wp.set_device("cpu")
    main()
