"""Fit the gain of a saturating actuator (tanh) with a hand-written adjoint, to reach target angles."""

import numpy as np
import warp as wp

N = 32


@wp.func
def saturate(u: float) -> float:
    return wp.tanh(u)


@wp.func_grad(saturate)
def adj_saturate(u: float, adj_ret: float):
    t = wp.tanh(u)
    wp.adjoint[u] += adj_ret * (1.0 - t * t)


@wp.kernel
def actuate(command: wp.array(dtype=float), gain: wp.array(dtype=float), angle: wp.array(dtype=float)):
    i = wp.tid()
    angle[i] = 1.5 * saturate(gain[0] * command[i])


@wp.kernel
def tracking_loss(angle: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = angle[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    p[0] = p[0] - lr * g[0]


def main():
    rng = np.random.default_rng(3)
    command = wp.array(rng.uniform(-1.0, 1.0, N), dtype=float)
    target = wp.array(1.5 * np.tanh(1.7 * command.numpy()), dtype=float)
    gain = wp.array([0.6], dtype=float, requires_grad=True)
    for it in range(4):
        angle = wp.zeros(N, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(actuate, dim=N, inputs=[command, gain], outputs=[angle])
            wp.launch(tracking_loss, dim=N, inputs=[angle, target], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd, dim=1, inputs=[gain, gain.grad, 0.05])
        tape.zero()


if __name__ == "__main__":
    main()
