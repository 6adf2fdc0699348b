"""Receding-horizon control of a row of pendulums: every iteration optimises the controls over a short
horizon, then continues from the state the horizon ended in."""

import numpy as np
import warp as wp

N = 16
HORIZON = 2  # control intervals per window
SUBSTEPS = 10
DT = 0.04


@wp.kernel
def pendulum_step(
    s: wp.array(dtype=wp.vec2), u: wp.array(dtype=float), t: int, dt: float, s_out: wp.array(dtype=wp.vec2)
):
    i = wp.tid()
    angle = s[i][0]
    omega = s[i][1]
    for _k in range(SUBSTEPS):
        omega = omega + dt * (-9.8 * wp.sin(angle) - 0.1 * omega + u[t])
        angle = angle + dt * omega
    s_out[i] = wp.vec2(angle, omega)


@wp.kernel
def upright_loss(s: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = s[i][0] - 3.14159
    wp.atomic_add(loss, 0, d * d + 0.1 * s[i][1] * s[i][1])


@wp.kernel
def sgd_step(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def rollout(states, u, loss):
    for t in range(HORIZON):
        wp.launch(pendulum_step, dim=N, inputs=[states[t], u, t, DT], outputs=[states[t + 1]])
    wp.launch(upright_loss, dim=N, inputs=[states[HORIZON]], outputs=[loss])


def main():
    s0 = np.stack([np.linspace(0.5, 2.5, N), np.zeros(N)], 1)
    start = wp.array(s0, dtype=wp.vec2, requires_grad=True)
    states = [start, wp.zeros_like(start), wp.zeros_like(start)]
    u = wp.zeros(HORIZON, dtype=float, requires_grad=True)
    tape = wp.Tape()
    for it in range(4):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            rollout(states, u, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=HORIZON, inputs=[u, u.grad, 0.01])
        tape.zero()
        tape.reset()
        states[0] = states[HORIZON]


if __name__ == "__main__":
    main()
