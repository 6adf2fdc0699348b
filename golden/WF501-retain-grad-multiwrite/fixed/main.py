"""Calibrate the diffusivity of a heated rod from a measured temperature profile.

The per-step temperature fields keep their gradients for a sensitivity plot."""

import numpy as np
import warp as wp

N = 32
STEPS = 40
DX = 1.0 / (N - 1)
DT = 1.0e-4


@wp.kernel
def diffuse(u: wp.array(dtype=float), kappa: wp.array(dtype=float), dt: float, dx: float, u_out: wp.array(dtype=float)):
    i = wp.tid()
    left = u[wp.max(i - 1, 0)]
    right = u[wp.min(i + 1, N - 1)]
    k = kappa[0] * (1.0 + u[i] * u[i])  # temperature-dependent conductivity
    u_out[i] = u[i] + dt * k * (left - 2.0 * u[i] + right) / (dx * dx)


@wp.kernel
def dirichlet(u: wp.array(dtype=float), t_left: float, t_right: float):
    u[0] = t_left
    u[N - 1] = t_right


@wp.kernel
def misfit(u: wp.array(dtype=float), measured: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = u[i] - measured[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    x[0] = x[0] - lr * grad[0]


def simulate(kappa, measured, loss, history):
    u = wp.array(np.sin(np.linspace(0.0, np.pi, N)), dtype=float, requires_grad=True)
    for _step in range(STEPS):
        u_next = wp.zeros(N, dtype=float, requires_grad=True)
        wp.launch(diffuse, dim=N, inputs=[u, kappa, DT, DX], outputs=[u_next])
        wp.launch(dirichlet, dim=1, inputs=[u_next, 1.0, 0.0])
        history.append(u_next)
        u = u_next
    wp.launch(misfit, dim=N, inputs=[u, measured], outputs=[loss])


def main():
    kappa = wp.array([0.5], dtype=float, requires_grad=True)
    x = np.linspace(0.0, 1.0, N)
    measured = wp.array(0.8 * np.sin(np.pi * x) + (1.0 - x) * 0.3, dtype=float)
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        history = []
        with tape:
            simulate(kappa, measured, loss, history)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            sensitivity = np.abs(history[0].grad.numpy()).max()
            print(f"max |dloss/du_1| = {sensitivity:.4f}")
        wp.launch(sgd_step, dim=1, inputs=[kappa, kappa.grad, 0.1])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
