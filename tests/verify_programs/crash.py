"""Crashes in the middle of its first iteration, before any backward."""

import warp as wp


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


def main():
    x = wp.ones(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    with wp.Tape():
        wp.launch(double, dim=4, inputs=[x], outputs=[y])
    raise RuntimeError("simulated failure in the user's training script")


if __name__ == "__main__":
    main()
