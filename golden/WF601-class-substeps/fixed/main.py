"""Tune the two feedback gains of a swarm controller so the swarm reaches the goal quickly.

The controller acts once per frame; the simulator takes SUBSTEPS steps per frame. The episode
objective is the summed distance to the goal at the end of every frame.
"""

import numpy as np
import warp as wp

import sim

FRAMES = 5
SUBSTEPS = 2
ITERS = 3
LR = 0.002


@wp.kernel
def accumulate_loss(term: wp.array(dtype=float), total: wp.array(dtype=float)):
    """Add one window's loss to the episode loss, on the tape (warpfix WF601)."""
    wp.atomic_add(total, 0, term[0])


def main():
    model = sim.Model(sim.N)
    gains = wp.array([2.0, 0.5], dtype=float, requires_grad=True)
    ctrl = wp.zeros(sim.N, dtype=wp.vec2, requires_grad=True)
    # warpfix WF601: one state per step of the whole episode (SUBSTEPS + 1 for one window before)
    states = [model.state() for _ in range(FRAMES * SUBSTEPS + 1)]
    for it in range(ITERS):
        model.reset(states[0])
        episode = 0.0
        loss_total = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for frame in range(FRAMES):
                ctrl = wp.zeros(sim.N, dtype=wp.vec2, requires_grad=True)
                loss = wp.zeros(1, dtype=float, requires_grad=True)
                wp.launch(
                    sim.policy, dim=sim.N, inputs=[states[frame * SUBSTEPS].q, states[frame * SUBSTEPS].qd, gains, sim.GOAL], outputs=[ctrl]
                )
                for s in range(SUBSTEPS):
                    model.step(states[frame * SUBSTEPS + s], states[frame * SUBSTEPS + s + 1], ctrl, sim.DT)
                wp.launch(sim.goal_loss, dim=sim.N, inputs=[states[(frame + 1) * SUBSTEPS].q, sim.GOAL], outputs=[loss])
                wp.launch(accumulate_loss, dim=1, inputs=[loss], outputs=[loss_total])
                episode += float(loss.numpy()[0])
        tape.backward(loss_total)
        if it == 0:
            print(f"loss0 = {episode}")
        print(f"iter {it}: loss = {episode:.4f}  dloss/dgains = {gains.grad.numpy()}")
        gains.assign(gains.numpy() - LR * gains.grad.numpy())
        tape.zero()


if __name__ == "__main__":
    main()
