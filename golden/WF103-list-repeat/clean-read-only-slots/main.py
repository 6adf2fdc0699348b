"""(The repeated slot is only read: one shared zero forcing per step.) Damped pendulums integrated
over a horizon; the per-step states are fresh, the per-step forcing is one shared array."""

import numpy as np
import warp as wp

N = 8
STEPS = 6
DT = 0.1


@wp.kernel
def pendulum_step(theta: wp.array(dtype=float), damp: wp.array(dtype=float), force: wp.array(dtype=float),
                  theta_new: wp.array(dtype=float)):
    i = wp.tid()
    theta_new[i] = theta[i] - DT * (wp.sin(theta[i]) + damp[i] * theta[i] - force[i])


@wp.kernel
def settle_loss(theta: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, theta[i] * theta[i])


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


class Rollout:
    def __init__(self):
        self.damp = wp.array(np.linspace(0.2, 1.0, N), dtype=float, requires_grad=True)
        self.theta = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
        self.force = [wp.zeros(N, dtype=float)] * STEPS
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def forward(self):
        for t in range(STEPS):
            wp.launch(pendulum_step, dim=N, inputs=[self.theta[t], self.damp, self.force[t]],
                      outputs=[self.theta[t + 1]])
        wp.launch(settle_loss, dim=N, inputs=[self.theta[STEPS]], outputs=[self.loss])

    def train(self, iterations):
        start = np.linspace(0.5, 2.0, N)
        for it in range(iterations):
            self.theta[0].assign(start)
            self.loss.zero_()
            tape = wp.Tape()
            with tape:
                self.forward()
            tape.backward(self.loss)
            if it == 0:
                print(f"loss0 = {self.loss.numpy()[0]}")
            wp.launch(sgd_step, dim=N, inputs=[self.damp, self.damp.grad, 0.05])
            tape.zero()


if __name__ == "__main__":
    Rollout().train(3)
