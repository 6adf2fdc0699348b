"""Buggy (WF106 at the launch): a tanh activation launched in place, `inputs=[z], outputs=[z]`, so the
activation's adjoint replays against tanh(z) instead of z. `--fixed` writes a separate output."""

import sys

import numpy as np
import warp as wp


@wp.kernel
def affine(x: wp.array(dtype=float), w: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = w[0] * x[i] + w[1]


@wp.kernel
def act(z: wp.array(dtype=float), h: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = wp.tanh(z[i])


@wp.kernel
def sq_sum(h: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, h[i] * h[i])


def main():
    fixed = "--fixed" in sys.argv
    x = wp.array(np.linspace(-2.0, 2.0, 16).astype(np.float32))
    w = wp.array([1.5, 0.25], dtype=float, requires_grad=True)
    z = wp.zeros(16, dtype=float, requires_grad=True)
    h = wp.zeros(16, dtype=float, requires_grad=True)
    for it in range(2):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(affine, dim=16, inputs=[x, w], outputs=[z])
            wp.launch(act, dim=16, inputs=[z], outputs=[h if fixed else z])
            wp.launch(sq_sum, dim=16, inputs=[h if fixed else z], outputs=[loss])
        tape.backward(loss)
        print(f"loss {it} {loss.numpy()[0]:.9g} grad {w.grad.numpy()}")
        w.assign(w.numpy() - 0.1 * w.grad.numpy())
        tape.zero()


if __name__ == "__main__":
    main()
