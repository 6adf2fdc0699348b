"""Tune the rest lengths of a hanging newton spring chain so that its free end reaches a target after a
short swing. The trainer steps the semi-implicit solver into a state of its own every frame, the way
newton's diffsim examples do."""

import numpy as np
import warp as wp

import newton

LINKS = 4
FRAMES = 12
DT = 0.01


@wp.kernel
def tip_loss(q: wp.array(dtype=wp.vec3), tip: int, target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[tip] - target
    loss[0] = wp.dot(d, d)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class ChainTrainer:
    def __init__(self):
        builder = newton.ModelBuilder()
        builder.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 0.0)
        for i in range(1, LINKS + 1):
            builder.add_particle((0.25 * i, 0.0, 1.0), (0.0, 0.0, 0.0), 0.2)
            builder.add_spring(i - 1, i, 100.0, 0.5, 0)
        self.model = builder.finalize(device="cpu", requires_grad=True)
        self.solver = newton.solvers.SolverSemiImplicit(self.model)
        self.control = self.model.control()
        self.states = [self.model.state() for _ in range(FRAMES + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = None

    def forward(self):
        self.tape = wp.Tape()
        with self.tape:
            for f in range(FRAMES):
                self.states[f].clear_forces()
                self.solver.step(self.states[f], self.states[f + 1], self.control, None, DT)
            wp.launch(tip_loss, dim=1, inputs=[self.states[-1].particle_q, LINKS, wp.vec3(0.8, 0.0, 0.6)],
                      outputs=[self.loss])

    def step(self):
        self.tape.backward(self.loss)
        rest = self.model.spring_rest_length
        print(f"grad = {np.array2string(rest.grad.numpy(), precision=6)}")
        wp.launch(sgd, dim=rest.shape[0], inputs=[rest, rest.grad, 0.01])
        self.tape.zero()


def main():
    trainer = ChainTrainer()
    trainer.forward()
    print(f"loss0 = {trainer.loss.numpy()[0]}")
    trainer.step()


if __name__ == "__main__":
    main()
