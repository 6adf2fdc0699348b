"""A stochastic forward the probe cannot pin: fresh noise is written on the host, in place through a
numpy view, between two launches that read the same buffer. Replays cannot reproduce the loss, so
FD cannot judge the gradient (CPU only: `.numpy()` aliases device memory there)."""

import numpy as np
import warp as wp

N = 32


@wp.kernel
def perturb(theta: wp.array(dtype=float), noise: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(theta[i] + 0.1 * noise[i])


@wp.kernel
def energy(y: wp.array(dtype=float), noise: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, (y[i] - noise[i]) * (y[i] - noise[i]))


def main():
    rng = np.random.default_rng()
    theta = wp.array(np.linspace(0.0, 1.0, N).astype(np.float32), requires_grad=True, device="cpu")
    noise = wp.zeros(N, dtype=float, device="cpu")
    for it in range(2):
        y = wp.zeros(N, dtype=float, requires_grad=True, device="cpu")
        loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
        tape = wp.Tape()
        with tape:
            wp.launch(perturb, dim=N, inputs=[theta, noise], outputs=[y], device="cpu")
            noise.numpy()[:] = rng.normal(size=N)
            wp.launch(energy, dim=N, inputs=[y, noise], outputs=[loss], device="cpu")
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        theta.assign(theta.numpy() - 0.01 * theta.grad.numpy())
        tape.zero()


if __name__ == "__main__":
    main()
