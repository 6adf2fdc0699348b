"""Calibrate a heat source so that the temperature of a rod after a short heating matches a measurement.

Transient heat equation u_t = u_xx + source, explicit time steps, u = 0 at both ends: every step is
part of the model, nothing is an unconverged solve.
"""

import numpy as np
import warp as wp

N = 32
H2 = (1.0 / (N - 1)) ** 2
HEAT_STEPS = 12
RATE = 0.4  # dt / h^2, below the explicit stability limit 0.5


@wp.kernel
def heat_step(u: wp.array(dtype=float), source: wp.array(dtype=float), h2: float, u_new: wp.array(dtype=float)):
    i = wp.tid()
    if i == 0 or i == u.shape[0] - 1:
        u_new[i] = 0.0
    else:
        u_new[i] = u[i] + RATE * (u[i - 1] - 2.0 * u[i] + u[i + 1] + h2 * source[i])


@wp.kernel
def misfit(u: wp.array(dtype=float), measured: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = u[i] - measured[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def heat(source):
    """Temperature profile after HEAT_STEPS explicit steps from a cold rod."""
    u = wp.zeros(N, dtype=float, requires_grad=True)
    for _ in range(HEAT_STEPS):
        u_new = wp.zeros(N, dtype=float, requires_grad=True)
        wp.launch(heat_step, dim=N, inputs=[u, source, H2], outputs=[u_new])
        u = u_new
    return u


def measure():
    """The 'measured' profile: the same heating with a Gaussian source."""
    xs = np.linspace(0.0, 1.0, N)
    return heat(wp.array(40.0 * np.exp(-((xs - 0.4) ** 2) / 0.02), dtype=float))


def main():
    measured = measure()
    source = wp.full(N, 10.0, dtype=float, requires_grad=True)
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            u = heat(source)
            wp.launch(misfit, dim=N, inputs=[u, measured], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        print(f"iter {it}: loss = {loss.numpy()[0]:.5f}")
        wp.launch(sgd_step, dim=N, inputs=[source, source.grad, 2000.0])
        tape.zero()


if __name__ == "__main__":
    main()
