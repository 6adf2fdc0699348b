"""Pendulums with quadratic air drag: the angles live on one array per step, the angular rate
too (fit the drag so the swing dies out)."""

import numpy as np
import warp as wp

N = 8
STEPS = 6
DT = 0.1


@wp.kernel
def swing(theta: wp.array(dtype=float), rate: wp.array(dtype=float), drag: wp.array(dtype=float),
          theta_out: wp.array(dtype=float), rate_out: wp.array(dtype=float)):
    i = wp.tid()
    w = rate[i]
    a = theta[i]
    w_new = w - DT * (wp.sin(a) + drag[i] * w * wp.abs(w))
    theta_out[i] = a + DT * w_new
    rate_out[i] = w_new


@wp.kernel
def swing_energy(theta: wp.array(dtype=float), rate: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.5 * rate[i] * rate[i] + 1.0 - wp.cos(theta[i]))


class Pendulums:
    def __init__(self):
        self.drag = wp.array(np.linspace(0.1, 0.8, N).astype(np.float32), dtype=float, requires_grad=True)
        self.theta = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
        self.rate = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def step(self, t):
        wp.launch(swing, dim=N, inputs=[self.theta[t], self.rate[t], self.drag],
                  outputs=[self.theta[t + 1], self.rate[t + 1]])

    def objective(self):
        self.loss.zero_()
        self.rate[0].fill_(1.5)
        for t in range(STEPS):
            self.step(t)
        wp.launch(swing_energy, dim=N, inputs=[self.theta[STEPS], self.rate[STEPS]], outputs=[self.loss])

    def train(self, iterations):
        self.theta[0].assign(np.linspace(0.2, 1.0, N).astype(np.float32))
        for it in range(iterations):
            tape = wp.Tape()
            with tape:
                self.objective()
            tape.backward(self.loss)
            if it == 0:
                print(f"loss0 = {self.loss.numpy()[0]}")
                print(f"forward: theta = {self.theta[STEPS].numpy().tolist()}")
                print(f"grad0 = {self.drag.grad.numpy().tolist()}")
            self.drag.assign(self.drag.numpy() - 0.5 * self.drag.grad.numpy())
            tape.zero()


if __name__ == "__main__":
    wp.set_device("cpu")
    Pendulums().train(3)
