"""Learn a constant push that holds a row of oscillators near a target point over an episode.

The episode is simulated frame by frame by `rollout`, which keeps one window of states and
carries the last one into the first slot for the next frame.
"""

import warp as wp

import sim

FRAMES = 4
ITERS = 3
LR = 0.5


def rollout(states, force, grad_sum):
    """Simulate one episode; add d(loss)/d(force) to ``grad_sum`` and return the episode loss."""
    episode = 0.0
    for frame in range(FRAMES):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            sim.simulate_frame(states, force, loss)
        tape.backward(loss)
        wp.launch(sim.accumulate, dim=sim.N, inputs=[grad_sum, force.grad])
        tape.zero()
        episode += float(loss.numpy()[0])
        states[0] = states[-1]
    return episode


def main():
    force = wp.full(sim.N, wp.vec2(1.0, -0.5), dtype=wp.vec2, requires_grad=True)
    grad_sum = wp.zeros(sim.N, dtype=wp.vec2)
    states = [sim.State() for _ in range(sim.SUBSTEPS + 1)]
    for it in range(ITERS):
        grad_sum.zero_()
        episode = rollout(states, force, grad_sum)
        if it == 0:
            print(f"loss0 = {episode}")
        print(f"iter {it}: loss = {episode:.4f}  |grad| = {abs(grad_sum.numpy()).sum():.4f}")
        wp.launch(sim.sgd_step, dim=sim.N, inputs=[force, grad_sum, LR])


if __name__ == "__main__":
    main()
