"""Hanging spring chain (newton, semi-implicit): tune the spring rest lengths
so that the free end of the chain reaches a target point after a short swing."""

import numpy as np
import warp as wp
import warp.optim

import newton

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def gather_tip(q: wp.array(dtype=wp.vec3), tip_index: int, tip: wp.array(dtype=wp.vec3)):
    tip[0] = q[tip_index]


@wp.kernel
def tip_loss(tip: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = tip[0] - target
    loss[0] = wp.dot(d, d)


class ChainTrainer:
    def __init__(self, links=5, frames=60, dt=0.01, lr=0.01):
        self.frames = frames
        self.dt = dt
        self.device = wp.get_device("cpu")

        builder = newton.ModelBuilder()
        builder.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 0.0)  # anchor
        for i in range(1, links + 1):
            builder.add_particle((0.25 * i, 0.0, 1.0), (0.0, 0.0, 0.0), 0.2)
            builder.add_spring(i - 1, i, 100.0, 0.5, 0)
        self.model = builder.finalize(device=self.device, requires_grad=True)
        self.tip_index = links

        self.solver = newton.solvers.SolverSemiImplicit(self.model)
        self.control = self.model.control()
        self.states = [self.model.state() for _ in range(frames + 1)]

        self.target = wp.vec3(0.8, 0.0, -0.6)
        self.tip = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
        self.start_tip = wp.zeros(1, dtype=wp.vec3)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

        self.rest = self.model.spring_rest_length
        self.opt = warp.optim.Adam([self.rest], lr=lr)
        self.tape = None

    def forward(self):
        self.tape = wp.Tape()
        with self.tape:
            for f in range(self.frames):
                self.states[f].clear_forces()
                self.solver.step(self.states[f], self.states[f + 1], self.control, None, self.dt)
            wp.launch(gather_tip, dim=1, inputs=[self.states[-1].particle_q, self.tip_index], outputs=[self.tip])
            wp.launch(tip_loss, dim=1, inputs=[self.tip, self.target], outputs=[self.loss])
        # bookkeeping: where did the tip start this episode?
        wp.launch(gather_tip, dim=1, inputs=[self.states[0].particle_q, self.tip_index], outputs=[self.start_tip])
        return self.loss

    def backward(self):
        self.tape.backward(self.loss)

    def step(self):
        self.opt.step([self.rest.grad])
        self.tape.zero()


if __name__ == "__main__":
    trainer = ChainTrainer()
    for it in range(4):
        loss = trainer.forward()
        trainer.backward()
        print(f"loss {it} {loss.numpy()[0]:.9g}")
        if it == 0:
            print("grad", "spring_rest_length", np.array2string(trainer.rest.grad.numpy().ravel()[:8], precision=9))
        trainer.step()
