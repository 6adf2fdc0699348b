"""Tune the stiffness of elastic tethers so that swinging particles end near a target height.

The state of each particle is packed as (x, y, vx, vy); two state buffers are reused in turn.
"""

import numpy as np
import warp as wp

N = 16
STEPS = 20
DT = 0.02


@wp.kernel
def tether_step(s: wp.array(dtype=wp.vec4), stiffness: wp.array(dtype=float), dt: float, s_out: wp.array(dtype=wp.vec4)):
    i = wp.tid()
    p = wp.vec2(s[i][0], s[i][1])
    vel = wp.vec2(s[i][2], s[i][3])
    r = wp.length(p)
    f = -stiffness[0] * (r - 1.0) * wp.normalize(p) + wp.vec2(0.0, -9.8)
    vel = vel + dt * f
    p = p + dt * vel
    s_out[i] = wp.vec4(p[0], p[1], vel[0], vel[1])


@wp.kernel
def height_loss(s: wp.array(dtype=wp.vec4), target: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = s[i][1] - target
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    x[0] = x[0] - lr * grad[0]


def initial_state():
    angles = np.linspace(-0.5, 0.5, N)
    s = np.stack([np.sin(angles), -np.cos(angles), np.zeros(N), np.ones(N)], 1)
    return wp.array(s, dtype=wp.vec4, requires_grad=True)


def simulate(stiffness, loss):
    cur = initial_state()
    nxt = wp.zeros_like(cur)
    for _step in range(STEPS):
        wp.launch(tether_step, dim=N, inputs=[cur, stiffness, DT], outputs=[nxt])
        cur, nxt = nxt, cur
    wp.launch(height_loss, dim=N, inputs=[cur, -1.2], outputs=[loss])


def main():
    stiffness = wp.array([30.0], dtype=float, requires_grad=True)
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            simulate(stiffness, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=1, inputs=[stiffness, stiffness.grad, 10.0])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
