"""Tune the stiffness of elastic tethers so that swinging particles end near a target height.

A trainer class keeps the trajectory as a list of states; to save memory, every state after
the initial one is one of two buffers, used in turn. It learns online: each step is recorded
on its own tape, backpropagated and applied before the next step overwrites a buffer.
"""

import numpy as np
import warp as wp

N = 16
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


class Trainer:
    def __init__(self, steps):
        self.steps = steps
        angles = np.linspace(-0.5, 0.5, N)
        s = np.stack([np.sin(angles), -np.cos(angles), np.zeros(N), np.ones(N)], 1)
        x0 = wp.array(s, dtype=wp.vec4, requires_grad=True)
        pool = [wp.zeros(N, dtype=wp.vec4, requires_grad=True) for _ in range(2)]
        self.states = [x0] + [pool[i % 2] for i in range(steps)]
        self.stiffness = wp.array([30.0], dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()

    def step(self, t):
        wp.launch(tether_step, dim=N, inputs=[self.states[t], self.stiffness, DT], outputs=[self.states[t + 1]])

    def train_iter(self):
        for t in range(self.steps):
            self.loss.zero_()
            with self.tape:
                self.step(t)
                wp.launch(height_loss, dim=N, inputs=[self.states[t + 1], -1.2], outputs=[self.loss])
            self.tape.backward(self.loss)
            wp.launch(sgd_step, dim=1, inputs=[self.stiffness, self.stiffness.grad, 0.5])
            self.tape.zero()
            self.tape.reset()


def main():
    trainer = Trainer(20)
    for it in range(3):
        trainer.train_iter()
        if it == 0:
            print(f"loss0 = {trainer.loss.numpy()[0]}")


if __name__ == "__main__":
    main()
