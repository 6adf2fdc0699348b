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


class Trainer:
    def __init__(self):
        self.model = sim.Model(sim.N)
        self.gains = wp.array([2.0, 0.5], dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def episode(self):
        ctrl = wp.zeros(sim.N, dtype=wp.vec2, requires_grad=True)
        states = [self.model.state() for _ in range(SUBSTEPS + 1)]
        self.model.reset(states[0])
        grad_gains = np.zeros(2, dtype=np.float32)
        total = 0.0
        for frame in range(FRAMES):
            self.loss.zero_()
            tape = wp.Tape()
            with tape:
                wp.launch(
                    sim.policy, dim=sim.N, inputs=[states[0].q, states[0].qd, self.gains, sim.GOAL], outputs=[ctrl]
                )
                for s in range(SUBSTEPS):
                    self.model.step(states[s], states[s + 1], ctrl, sim.DT)
                wp.launch(sim.goal_loss, dim=sim.N, inputs=[states[-1].q, sim.GOAL], outputs=[self.loss])
            tape.backward(self.loss)
            grad_gains += self.gains.grad.numpy()
            tape.zero()
            total += float(self.loss.numpy()[0])
            # the frame's last state starts the next frame
            wp.copy(states[0].q, states[-1].q)
            wp.copy(states[0].qd, states[-1].qd)
        return total, grad_gains


def main():
    trainer = Trainer()
    for it in range(ITERS):
        total, grad_gains = trainer.episode()
        if it == 0:
            print(f"loss0 = {total}")
        trainer.gains.assign(trainer.gains.numpy() - LR * grad_gains)


if __name__ == "__main__":
    main()
