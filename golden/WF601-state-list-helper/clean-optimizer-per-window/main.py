"""Receding-horizon tuning: the push is updated after every frame (one optimizer step per window).

Each frame's gradient is used at once, so nothing is summed across windows; the state list
rotates its buffers so that the next frame starts from the last state.
"""

import warp as wp

import sim

FRAMES = 4
ITERS = 3
LR = 0.5


def rollout(states, force):
    """Simulate one episode, stepping ``force`` after every frame; return the episode loss."""
    episode = 0.0
    for frame in range(FRAMES):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            sim.simulate_frame(states, force, loss)
        tape.backward(loss)
        wp.launch(sim.sgd_step, dim=sim.N, inputs=[force, force.grad, LR])
        tape.zero()
        episode += float(loss.numpy()[0])
        states[0], states[-1] = states[-1], states[0]
    return episode


def main():
    force = wp.full(sim.N, wp.vec2(1.0, -0.5), dtype=wp.vec2, requires_grad=True)
    for it in range(ITERS):
        states = [sim.State() for _ in range(sim.SUBSTEPS + 1)]
        episode = rollout(states, force)
        if it == 0:
            print(f"loss0 = {episode}")
        print(f"iter {it}: loss = {episode:.4f}")


if __name__ == "__main__":
    main()
