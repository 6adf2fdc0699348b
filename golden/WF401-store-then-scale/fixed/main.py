"""Tune the per-motor gains of a controller so that driven carts reach their targets (a store, then scaled in place)."""

import numpy as np
import warp as wp

N = 8
STEPS = 6
DT = 0.1


@wp.kernel
def motor_torques(actions: wp.array(dtype=float), gains: wp.array(dtype=float), t: int, torques: wp.array(dtype=float)):
    i = wp.tid()
    action = actions[i] * (1.0 + 0.1 * float(t))
    torques[i] = gains[i] * action


@wp.kernel
def integrate(x: wp.array(dtype=float), torques: wp.array(dtype=float), dt: float, x_new: wp.array(dtype=float)):
    i = wp.tid()
    x_new[i] = x[i] + dt * torques[i]


@wp.kernel
def distance_loss(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def main():
    rng = np.random.default_rng(3)
    gains = wp.array(rng.uniform(0.5, 1.5, N), dtype=float, requires_grad=True)
    actions = wp.array(rng.uniform(-1.0, 1.0, N), dtype=float)
    target = wp.array(rng.uniform(-1.0, 1.0, N), dtype=float)
    x0 = wp.zeros(N, dtype=float, requires_grad=True)
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            x = x0
            for t in range(STEPS):
                torques = wp.empty(N, dtype=float, requires_grad=True)
                wp.launch(motor_torques, dim=N, inputs=[actions, gains, t], outputs=[torques])
                x_new = wp.empty_like(x)
                wp.launch(integrate, dim=N, inputs=[x, torques, DT], outputs=[x_new])
                x = x_new
            wp.launch(distance_loss, dim=N, inputs=[x, target], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"forward: x = {x.numpy().tolist()}")
            print(f"grad0 = {gains.grad.numpy().tolist()}")
        wp.launch(sgd_step, dim=N, inputs=[gains, gains.grad, 0.05])
        tape.zero()
        tape.reset()
    print(f"loss = {loss.numpy()[0]}")


if __name__ == "__main__":
    main()
