"""Correct gradients that FD cannot see: a float32 loss accumulated from many large terms.

Each term changes far below the rounding of the running float32 sum, so the loss does not move
under any perturbation of `gain` that keeps the model meaningful, while the exact derivative is
well above the float32 resolution of the loss.
"""

import numpy as np
import warp as wp

N = 4096


@wp.kernel
def energy(x: wp.array(dtype=float), gain: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 1000.0 + 0.01 * gain[0] * x[i])


def main():
    x = wp.array(np.random.default_rng(5).uniform(0.5, 1.0, N).astype(np.float32))
    gain = wp.array(np.array([0.5], dtype=np.float32), requires_grad=True)
    for it in range(2):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(energy, dim=N, inputs=[x, gain, loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        gain.assign(gain.numpy() - 1e-3 * gain.grad.numpy())
        tape.zero()


if __name__ == "__main__":
    main()
