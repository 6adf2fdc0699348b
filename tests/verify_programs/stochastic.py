"""A stochastic forward (fresh host-chosen seed each iteration): the seed is a launch argument, so the
probe pins it and FD is exact. `--bug` drops requires_grad on the noisy intermediate (all-zero gradient)."""

import sys

import numpy as np
import warp as wp

N = 64


@wp.kernel
def noisy(theta: wp.array(dtype=float), seed: int, y: wp.array(dtype=float)):
    i = wp.tid()
    state = wp.rand_init(seed, i)
    y[i] = wp.sin(theta[i % 8] + 0.3 * wp.randn(state))


@wp.kernel
def mean_sq(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i] / float(N))


def main():
    bug = "--bug" in sys.argv
    host_rng = np.random.default_rng()
    theta = wp.array(np.linspace(0.1, 0.8, 8).astype(np.float32), requires_grad=True)
    for it in range(3):
        seed = int(host_rng.integers(0, 2**31 - 1))
        y = wp.zeros(N, dtype=float, requires_grad=not bug)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(noisy, dim=N, inputs=[theta, seed], outputs=[y])
            wp.launch(mean_sq, dim=N, inputs=[y, loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        theta.assign(theta.numpy() - 0.1 * theta.grad.numpy())
        tape.zero()


if __name__ == "__main__":
    main()
