"""Runs a forward pass and never calls tape.backward()."""

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
    print(f"loss0 = {y.numpy().sum()}")


if __name__ == "__main__":
    main()
