"""Beads on a nonlinear spring, integrated with two state objects used in turn (fit the stiffness so
that the beads end at the origin)."""

import numpy as np
import warp as wp

N = 8
STEPS = 6
DT = 0.05


class State:
    def __init__(self, n):
        self.q = wp.zeros(n, dtype=float, requires_grad=True)
        self.qd = wp.zeros(n, dtype=float, requires_grad=True)


@wp.kernel
def integrate(q: wp.array(dtype=float), qd: wp.array(dtype=float), k: wp.array(dtype=float),
              q_new: wp.array(dtype=float), qd_new: wp.array(dtype=float)):
    i = wp.tid()
    x = q[i]
    v = qd[i] - DT * k[i] * wp.sin(x)
    qd_new[i] = v
    q_new[i] = x + DT * v


@wp.kernel
def end_loss(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


class Beads:
    def __init__(self):
        self.k = wp.array(np.linspace(1.0, 3.0, N).astype(np.float32), dtype=float, requires_grad=True)
        self.states = [State(N) for _ in range(2)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def step(self, t):
        src = self.states[t % 2]
        self.states[(t + 1) % 2] = State(N)
        dst = self.states[(t + 1) % 2]
        wp.launch(integrate, dim=N, inputs=[src.q, src.qd, self.k], outputs=[dst.q, dst.qd])

    def train(self, iterations):
        start = np.linspace(0.4, 1.2, N).astype(np.float32)
        for it in range(iterations):
            self.states[0].q.assign(start)
            self.states[0].qd.zero_()
            self.loss.zero_()
            tape = wp.Tape()
            with tape:
                for t in range(STEPS):
                    self.step(t)
                wp.launch(end_loss, dim=N, inputs=[self.states[STEPS % 2].q], outputs=[self.loss])
            tape.backward(self.loss)
            if it == 0:
                print(f"loss0 = {self.loss.numpy()[0]}")
                print(f"forward: end = {self.states[STEPS % 2].q.numpy().tolist()}")
                print(f"grad0 = {self.k.grad.numpy().tolist()}")
            self.k.assign(self.k.numpy() - 0.2 * self.k.grad.numpy())
            tape.zero()


if __name__ == "__main__":
    wp.set_device("cpu")
    Beads().train(3)
