"""Hangs before its first backward (waits for an event that never comes)."""

import threading

import warp as wp


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


def main():
    x = wp.ones(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(double, dim=4, inputs=[x], outputs=[y])
    threading.Event().wait()
    tape.backward(y)


if __name__ == "__main__":
    main()
