"""Buggy: an array a recorded launch read is zeroed before the backward, inside the tape block
(WF105) or after it (``--after``: WF303)."""

import sys

import numpy as np
import warp as wp

N = 16


@wp.kernel
def square(a: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, a[wp.tid()] * a[wp.tid()])


def main():
    x = wp.array(np.linspace(0.5, 1.0, N).astype(np.float32), requires_grad=True)
    for _ in range(2):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            a = wp.empty_like(x)
            wp.copy(a, x)
            wp.launch(square, dim=N, inputs=[a, loss])
            if "--after" not in sys.argv:
                a.zero_()  # inside the tape block
        if "--after" in sys.argv:
            a.zero_()  # after the tape block
        tape.backward(loss)
        x.assign(np.linspace(0.5, 1.0, N).astype(np.float32) - 0.1 * x.grad.numpy())


if __name__ == "__main__":
    main()
