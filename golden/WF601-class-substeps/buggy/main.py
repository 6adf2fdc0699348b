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


def main():
    model = sim.Model(sim.N)
    gains = wp.array([2.0, 0.5], dtype=float, requires_grad=True)
    ctrl = wp.zeros(sim.N, dtype=wp.vec2, requires_grad=True)
    states = [model.state() for _ in range(SUBSTEPS + 1)]
    for it in range(ITERS):
        model.reset(states[0])
        grad_gains = np.zeros(2, dtype=np.float32)
        episode = 0.0
        for frame in range(FRAMES):
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            tape = wp.Tape()
            with tape:
                wp.launch(
                    sim.policy, dim=sim.N, inputs=[states[0].q, states[0].qd, gains, sim.GOAL], outputs=[ctrl]
                )
                for s in range(SUBSTEPS):
                    model.step(states[s], states[s + 1], ctrl, sim.DT)
                wp.launch(sim.goal_loss, dim=sim.N, inputs=[states[-1].q, sim.GOAL], outputs=[loss])
            tape.backward(loss)
            grad_gains += gains.grad.numpy()
            tape.zero()
            episode += float(loss.numpy()[0])
            # the frame's last state starts the next frame
            wp.copy(states[0].q, states[-1].q)
            wp.copy(states[0].qd, states[-1].qd)
        if it == 0:
            print(f"loss0 = {episode}")
        print(f"iter {it}: loss = {episode:.4f}  dloss/dgains = {grad_gains}")
        gains.assign(gains.numpy() - LR * grad_gains)


if __name__ == "__main__":
    main()
