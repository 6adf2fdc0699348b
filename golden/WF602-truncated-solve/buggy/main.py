"""Calibrate a heat source so that the steady temperature profile of a rod matches a measurement.

Steady state: -u'' = source on [0, 1], u = 0 at both ends, solved with Jacobi sweeps.
"""

import numpy as np
import warp as wp

N = 32
H2 = (1.0 / (N - 1)) ** 2
JACOBI_ITERS = 12
REFERENCE_SWEEPS = 4000


@wp.kernel
def jacobi_sweep(u: wp.array(dtype=float), source: wp.array(dtype=float), h2: float, u_new: wp.array(dtype=float)):
    i = wp.tid()
    if i == 0 or i == u.shape[0] - 1:
        u_new[i] = 0.0
    else:
        u_new[i] = 0.5 * (u[i - 1] + u[i + 1] + h2 * source[i])


@wp.kernel
def misfit(u: wp.array(dtype=float), measured: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = u[i] - measured[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def solve(source):
    """Temperature profile for ``source``: JACOBI_ITERS sweeps from a cold rod."""
    u = wp.zeros(N, dtype=float, requires_grad=True)
    for _ in range(JACOBI_ITERS):
        u_new = wp.zeros(N, dtype=float, requires_grad=True)
        wp.launch(jacobi_sweep, dim=N, inputs=[u, source, H2], outputs=[u_new])
        u = u_new
    return u


def measure():
    """The 'measured' profile: the converged solution for a Gaussian source (sweeps ping-pong, no tape)."""
    xs = np.linspace(0.0, 1.0, N)
    source = wp.array(40.0 * np.exp(-((xs - 0.4) ** 2) / 0.02), dtype=float)
    u = wp.zeros(N, dtype=float)
    u_tmp = wp.zeros(N, dtype=float)
    for _ in range(REFERENCE_SWEEPS):
        wp.launch(jacobi_sweep, dim=N, inputs=[u, source, H2], outputs=[u_tmp])
        u, u_tmp = u_tmp, u
    return u


def main():
    measured = measure()
    source = wp.full(N, 10.0, dtype=float, requires_grad=True)
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            u = solve(source)
            wp.launch(misfit, dim=N, inputs=[u, measured], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        print(f"iter {it}: loss = {loss.numpy()[0]:.5f}")
        wp.launch(sgd_step, dim=N, inputs=[source, source.grad, 50.0])
        tape.zero()


if __name__ == "__main__":
    main()
