"""Throw balls at a target behind a floor: optimise the launch velocity. The simulator keeps one
state buffer per step in lists; the floor projection of each step goes to a fresh array that
replaces the step's entry."""

import numpy as np
import warp as wp

N = 8
STEPS = 6
DT = 0.05


@wp.kernel
def integrate(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), dt: float, q_new: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q_new[i] = q[i] + dt * (v[i] + wp.vec3(0.0, -4.9 * dt, 0.0))


@wp.kernel
def floor(q: wp.array(dtype=wp.vec3), q_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = q[i]
    q_out[i] = wp.vec3(p[0], 0.25 * wp.log(1.0 + wp.exp(4.0 * p[1])), p[2])  # a soft floor


@wp.kernel
def target_loss(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - wp.vec3(1.0, 0.2, 0.5)
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def sgd(p: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class Sim:
    def __init__(self):
        self.q = [wp.zeros(N, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS + 1)]
        self.qp = [wp.zeros(N, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS)]

    def step(self, t, v):
        wp.launch(integrate, dim=N, inputs=[self.q[t], v, DT], outputs=[self.q[t + 1]])
        q_floor = wp.empty_like(self.q[t + 1])
        wp.launch(floor, dim=N, inputs=[self.q[t + 1]], outputs=[q_floor])
        self.q[t + 1] = q_floor

    def run(self, v, loss):
        for t in range(STEPS):
            self.step(t, v)
        wp.launch(target_loss, dim=N, inputs=[self.q[STEPS]], outputs=[loss])


def main():
    rng = np.random.default_rng(3)
    v = wp.array(rng.uniform(0.5, 2.0, (N, 3)), dtype=wp.vec3, requires_grad=True)
    sim = Sim()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            sim.run(v, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"forward: q_end = {sim.q[STEPS].numpy()[2].tolist()}")
        wp.launch(sgd, dim=N, inputs=[v, v.grad, 0.05])
        tape.zero()


if __name__ == "__main__":
    main()
