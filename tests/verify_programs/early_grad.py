"""Gradient descent on sum(p^2). `--in-tape` takes the optimizer step inside the `with tape:` block
(WF302: it reads p.grad before the backward produced it); `--before-backward` takes it after the block
and before the backward (WF304); `--host` reads p.grad on the host before the backward (WF304). The
default is correct: the step after the backward. `--jacobian` runs two backwards of one recording and
reads the gradient between them (correct: each read follows the backward that produced it);
`--check-first` checks the gradient once before training, reading it on the host right before the
first training tape records (correct: the read follows the check's own backward)."""

import sys

import numpy as np
import warp as wp

N = 8


@wp.kernel
def square(p: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, p[i] * p[i])


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main(mode: str):
    p = wp.array(np.linspace(1.0, 2.0, N), dtype=float, requires_grad=True)
    if mode == "check-first":
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        check = wp.Tape()
        with check:
            wp.launch(square, dim=N, inputs=[p], outputs=[loss])
        check.backward(loss)
        check.zero()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        if mode == "check-first" and it == 0:
            print("checked gradient norm", np.linalg.norm(p.grad.numpy()))
        with tape:
            wp.launch(square, dim=N, inputs=[p], outputs=[loss])
            if mode == "in-tape":
                wp.launch(sgd, dim=N, inputs=[p, p.grad, 0.01])
        if mode == "before-backward":
            wp.launch(sgd, dim=N, inputs=[p, p.grad, 0.01])
        if mode == "host":
            print("grad norm", np.linalg.norm(p.grad.numpy()))
        tape.backward(loss)
        if mode == "jacobian":
            first = p.grad.numpy().copy()
            tape.zero()
            tape.backward(loss)
            assert np.allclose(first, p.grad.numpy())
        print(f"iter {it}: loss = {loss.numpy()[0]:.6f}")
        if mode not in ("in-tape", "before-backward"):
            wp.launch(sgd, dim=N, inputs=[p, p.grad, 0.01])
        tape.zero()


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        main(sys.argv[1].removeprefix("--") if len(sys.argv) > 1 else "")
