"""Throw a hanging rope: find the initial velocities of the rope particles so that the
free end passes through a sequence of way-points (one per frame).

newton particles + springs, SolverSemiImplicit, a trainer class driven by a generic
train() helper.
"""
import numpy as np
import warp as wp

import newton

wp.config.quiet = True


@wp.kernel
def set_initial_velocity(v0: wp.array(dtype=wp.vec3), qd: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    qd[i] = v0[i]


@wp.kernel
def waypoint_cost(q: wp.array(dtype=wp.vec3), tip: int, target: wp.vec3, frame: int, costs: wp.array(dtype=float)):
    d = q[tip] - target
    costs[frame] = wp.dot(d, d)


@wp.kernel
def total_loss(costs: wp.array(dtype=float), v0: wp.array(dtype=wp.vec3), reg: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, costs[i])
    if i == 0:
        for j in range(v0.shape[0]):
            wp.atomic_add(loss, 0, reg * wp.dot(v0[j], v0[j]))


@wp.kernel
def sgd_momentum(x: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), m: wp.array(dtype=wp.vec3), lr: float, beta: float):
    i = wp.tid()
    m[i] = beta * m[i] + g[i]
    x[i] = x[i] - lr * m[i]


class RopeThrow:
    def __init__(self, n_links=7, frames=4, substeps=20, dt=1.0 / 600.0):
        self.frames = frames
        self.substeps = substeps
        self.dt = dt
        self.lr = 2.0
        self.reg = 1.0e-3

        builder = newton.ModelBuilder()
        builder.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 0.0, radius=0.01)  # anchor
        for i in range(1, n_links + 1):
            builder.add_particle((0.1 * i, 0.0, 1.0), (0.0, 0.0, 0.0), 0.05, radius=0.01)
            builder.add_spring(i - 1, i, 200.0, 0.5, 0)
        self.model = builder.finalize(device="cpu", requires_grad=True)
        self.tip = n_links

        self.solver = newton.solvers.SolverSemiImplicit(self.model)
        self.control = self.model.control()
        n_steps = frames * substeps
        self.states = [self.model.state(requires_grad=True) for _ in range(n_steps + 1)]

        self.targets = [wp.vec3(0.45, 0.25, 0.95), wp.vec3(0.35, 0.45, 0.95),
                        wp.vec3(0.2, 0.55, 0.9), wp.vec3(0.05, 0.6, 0.85)]
        self.v0 = wp.zeros(self.model.particle_count, dtype=wp.vec3, requires_grad=True)
        self.momentum = wp.zeros_like(self.v0)
        self.costs = wp.zeros(frames, dtype=float)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = None

    def simulate_frame(self, f):
        for s in range(self.substeps):
            t = f * self.substeps + s
            self.states[t].clear_forces()
            self.solver.step(self.states[t], self.states[t + 1], self.control, None, self.dt)
        wp.launch(waypoint_cost, dim=1,
                  inputs=[self.states[(f + 1) * self.substeps].particle_q, self.tip, self.targets[f], f],
                  outputs=[self.costs])

    def forward(self):
        self.loss.zero_()
        self.tape = wp.Tape()
        with self.tape:
            wp.launch(set_initial_velocity, dim=self.model.particle_count, inputs=[self.v0],
                      outputs=[self.states[0].particle_qd])
            for f in range(self.frames):
                self.simulate_frame(f)
            wp.launch(total_loss, dim=self.frames, inputs=[self.costs, self.v0, self.reg], outputs=[self.loss])
        return float(self.loss.numpy()[0])

    def backward(self):
        self.tape.backward(self.loss)

    def apply(self):
        wp.launch(sgd_momentum, dim=self.model.particle_count,
                  inputs=[self.v0, self.v0.grad, self.momentum, self.lr, 0.5])
        self.tape.zero()

    def parameters(self):
        return {"v0": self.v0}


def train(trainer, n_iters, callback):
    for it in range(n_iters):
        value = trainer.forward()
        trainer.backward()
        callback(it, value, trainer)
        trainer.apply()


def report(it, value, trainer):
    print("loss %d %.9g" % (it, value))
    if it == 0:
        for name, p in trainer.parameters().items():
            g = p.grad.numpy()[1:].flatten()
            print("grad %s [%s]" % (name, " ".join("%.9g" % x for x in g)))


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        train(RopeThrow(), 5, report)
