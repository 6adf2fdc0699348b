"""A row of damped oscillators simulated frame by frame under one tape; the simulator class keeps
its substep buffers in a list and carries the last substep into slot 0 at the end of each frame
(fit the driving force so that the final energy is small)."""

import numpy as np
import warp as wp

N = 16
FRAMES = 4
DT = 0.05


@wp.kernel
def integrate(v: wp.array(dtype=float), force: wp.array(dtype=float), dt: float, v_out: wp.array(dtype=float)):
    i = wp.tid()
    v_out[i] = v[i] * (1.0 - 0.5 * dt * v[i] * v[i]) + dt * force[i]


@wp.kernel
def energy(v: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, v[i] * v[i])


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


class Simulator:
    def __init__(self):
        self.substeps = 1
        self.force = wp.array(np.linspace(0.5, 2.0, N), dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def reset(self):
        start = wp.array(np.linspace(-1.0, 1.0, N), dtype=float, requires_grad=True)
        self.v = [start] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(self.substeps)]

    def frame(self):
        for s in range(self.substeps):
            wp.launch(integrate, dim=N, inputs=[self.v[s], self.force, DT], outputs=[self.v[s + 1]])
        self.v[0] = self.v[self.substeps]
        self.v[self.substeps] = wp.empty_like(self.v[self.substeps])

    def forward(self):
        for _ in range(FRAMES):
            self.frame()
        wp.launch(energy, dim=N, inputs=[self.v[0]], outputs=[self.loss])

    def step(self, it):
        self.reset()
        self.loss.zero_()
        tape = wp.Tape()
        with tape:
            self.forward()
        tape.backward(self.loss)
        if it == 0:
            print(f"loss0 = {self.loss.numpy()[0]}")
            print(f"forward: v = {self.v[0].numpy().tolist()}")
        wp.launch(sgd_step, dim=N, inputs=[self.force, self.force.grad, 0.02])
        tape.zero()


if __name__ == "__main__":
    sim = Simulator()
    for it in range(3):
        sim.step(it)
