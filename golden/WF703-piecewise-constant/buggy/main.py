"""Tune the gain of a proportional controller that drives carts to their set points. The
actuator only takes thrust commands in steps of DU, so the command is rounded."""

import numpy as np
import warp as wp

N = 16
STEPS = 20
DT = 0.05
DU = 0.5


@wp.kernel
def control_step(
    gain: wp.array(dtype=float),
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    goal: wp.array(dtype=float),
    dt: float,
    x_new: wp.array(dtype=float),
    v_new: wp.array(dtype=float),
):
    i = wp.tid()
    u = wp.round(gain[0] * (goal[i] - x[i]) / DU) * DU
    vel = v[i] + dt * (u - 0.5 * v[i])
    v_new[i] = vel
    x_new[i] = x[i] + dt * vel


@wp.kernel
def tracking_loss(x: wp.array(dtype=float), goal: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - goal[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def forward(gain, goal, loss):
    x = wp.zeros(N, dtype=float, requires_grad=True)
    v = wp.zeros(N, dtype=float, requires_grad=True)
    for _step in range(STEPS):
        x_new = wp.empty_like(x)
        v_new = wp.empty_like(v)
        wp.launch(control_step, dim=N, inputs=[gain, x, v, goal, DT], outputs=[x_new, v_new])
        x = x_new
        v = v_new
    wp.launch(tracking_loss, dim=N, inputs=[x, goal], outputs=[loss])


def setup():
    rng = np.random.default_rng(5)
    goal = wp.array(rng.uniform(0.5, 2.0, N), dtype=float)
    gain = wp.array([3.0], dtype=float, requires_grad=True)
    return gain, (goal,)


def main():
    gain, (goal,) = setup()
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(gain, goal, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=1, inputs=[gain, gain.grad, 0.01])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
