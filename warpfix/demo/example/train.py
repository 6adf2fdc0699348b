"""Find the launch velocities that make thrown particles land on their targets."""

import numpy as np
import warp as wp
from sim import simulate

N = 32
STEPS = 16
DT = 0.05
LR = 0.5
ITERATIONS = 12


@wp.kernel
def offsets(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    d[i] = x[i] - target[i]


@wp.kernel
def mean_square(d: wp.array(dtype=wp.vec3), inv_n: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.dot(d[i], d[i]) * inv_n)


@wp.kernel
def sgd(p: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main():
    rng = np.random.default_rng(7)
    x0 = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
    v0 = wp.array(rng.uniform(1.0, 3.0, (N, 3)), dtype=wp.vec3, requires_grad=True)
    target = wp.array(rng.uniform(0.5, 2.5, (N, 3)), dtype=wp.vec3)
    for it in range(ITERATIONS):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        d = wp.zeros(N, dtype=wp.vec3)
        tape = wp.Tape()
        with tape:
            x = simulate(x0, v0, STEPS, DT, 0.98)
            wp.launch(offsets, dim=N, inputs=[x, target], outputs=[d])
            wp.launch(mean_square, dim=N, inputs=[d, 1.0 / N], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]:.6f}")
        print(f"iteration {it:2d}  loss {loss.numpy()[0]:.6f}")
        wp.launch(sgd, dim=N, inputs=[v0, v0.grad, LR])


if __name__ == "__main__":
    wp.config.quiet = True
    main()
