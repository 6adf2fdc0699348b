"""Tune the two feedback gains of a swarm controller so the swarm reaches the goal quickly.

A trainer object holds the loss array; each frame (window) records its own tape and calls
`tape.backward(self.loss)`, summing the per-window gradients, while the state carries over.
"""

import numpy as np
import warp as wp

import sim

FRAMES = 4
SUBSTEPS = 2
ITERS = 3
LR = 0.002


@wp.kernel
def accumulate_loss(term: wp.array(dtype=float), total: wp.array(dtype=float)):
    """Add one window's loss to the episode loss, on the tape (warpfix WF601)."""
    wp.atomic_add(total, 0, term[0])


class Trainer:
    def __init__(self):
        self.model = sim.Model(sim.N)
        self.gains = wp.array([2.0, 0.5], dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def episode(self):
        ctrl = wp.zeros(sim.N, dtype=wp.vec2, requires_grad=True)
        # warpfix WF601: one state per step of the whole episode (SUBSTEPS + 1 for one window before)
        states = [self.model.state() for _ in range(FRAMES * SUBSTEPS + 1)]
        self.model.reset(states[0])
        total = 0.0
        loss_total = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for frame in range(FRAMES):
                ctrl = wp.zeros(sim.N, dtype=wp.vec2, requires_grad=True)
                self.loss = wp.zeros_like(self.loss)
                wp.launch(
                    sim.policy, dim=sim.N, inputs=[states[frame * SUBSTEPS].q, states[frame * SUBSTEPS].qd, self.gains, sim.GOAL], outputs=[ctrl]
                )
                for s in range(SUBSTEPS):
                    self.model.step(states[frame * SUBSTEPS + s], states[frame * SUBSTEPS + s + 1], ctrl, sim.DT)
                wp.launch(sim.goal_loss, dim=sim.N, inputs=[states[(frame + 1) * SUBSTEPS].q, sim.GOAL], outputs=[self.loss])
                wp.launch(accumulate_loss, dim=1, inputs=[self.loss], outputs=[loss_total])
                total += float(self.loss.numpy()[0])
        self.gains.grad.zero_()
        tape.backward(loss_total)
        return total, self.gains.grad.numpy()


def main():
    trainer = Trainer()
    for it in range(ITERS):
        total, grad_gains = trainer.episode()
        if it == 0:
            print(f"loss0 = {total}")
        trainer.gains.assign(trainer.gains.numpy() - LR * grad_gains)


if __name__ == "__main__":
    main()
