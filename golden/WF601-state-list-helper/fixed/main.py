"""Learn a constant push that holds a row of oscillators near a target point over an episode.

The episode is simulated frame by frame by `rollout`, which keeps one window of states and
carries the last one into the first slot for the next frame.
"""

import warp as wp

import sim

FRAMES = 4
ITERS = 3
LR = 0.5


@wp.kernel
def accumulate_loss(term: wp.array(dtype=float), total: wp.array(dtype=float)):
    """Add one window's loss to the episode loss, on the tape (warpfix WF601)."""
    wp.atomic_add(total, 0, term[0])


def rollout(states, force, grad_sum):
    """Simulate one episode; add d(loss)/d(force) to ``grad_sum`` and return the episode loss."""
    episode = 0.0
    loss_total = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for frame in range(FRAMES):
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            sim.simulate_frame(states[frame * sim.SUBSTEPS:(frame + 1) * sim.SUBSTEPS + 1], force, loss)
            wp.launch(accumulate_loss, dim=1, inputs=[loss], outputs=[loss_total])
            episode += float(loss.numpy()[0])
    tape.backward(loss_total)
    wp.launch(sim.accumulate, dim=sim.N, inputs=[grad_sum, force.grad])
    tape.zero()
    return episode


def main():
    force = wp.full(sim.N, wp.vec2(1.0, -0.5), dtype=wp.vec2, requires_grad=True)
    grad_sum = wp.zeros(sim.N, dtype=wp.vec2)
    # warpfix WF601: one state per step of the whole episode (sim.SUBSTEPS + 1 for one window before)
    states = [sim.State() for _ in range(FRAMES * sim.SUBSTEPS + 1)]
    for it in range(ITERS):
        grad_sum.zero_()
        episode = rollout(states, force, grad_sum)
        if it == 0:
            print(f"loss0 = {episode}")
        print(f"iter {it}: loss = {episode:.4f}  |grad| = {abs(grad_sum.numpy()).sum():.4f}")
        wp.launch(sim.sgd_step, dim=sim.N, inputs=[force, grad_sum, LR])


if __name__ == "__main__":
    main()
