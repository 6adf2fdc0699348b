"""The forward reads a parameter on the host (`k.numpy()`) and passes a value computed from it to a
kernel: the tape, and so autodiff and the probe's FD, see that value as a constant. Verify says so."""

import numpy as np
import warp as wp

N = 8


@wp.kernel
def scaled(k: wp.array(dtype=float), scale: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = scale * k[i] * k[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


def main():
    k = wp.array(np.linspace(0.5, 1.5, N).astype(np.float32), requires_grad=True)
    for it in range(2):
        scale = float(np.mean(k.numpy()))  # host-side dependence on the parameter
        y = wp.zeros(N, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(scaled, dim=N, inputs=[k, scale], outputs=[y])
            wp.launch(total, dim=N, inputs=[y], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        k.assign(k.numpy() - 0.01 * k.grad.numpy())
        tape.zero()


if __name__ == "__main__":
    main()
