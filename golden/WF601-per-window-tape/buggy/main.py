"""Learn a constant wind that keeps a thrown spray of particles close to a target over an episode.

The episode is simulated frame by frame; the objective is the sum of the per-frame distances.
"""

import warp as wp

import sim

FRAMES = 4
ITERS = 3


def main():
    wind = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
    grad_total = wp.zeros(1, dtype=wp.vec3)
    for it in range(ITERS):
        state = sim.State()
        grad_total.zero_()
        episode_loss = 0.0
        for frame in range(FRAMES):
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            tape = wp.Tape()
            with tape:
                sim.simulate_frame(state, wind, loss)
            tape.backward(loss)
            wp.launch(sim.accumulate, dim=1, inputs=[grad_total, wind.grad])
            tape.zero()
            episode_loss += float(loss.numpy()[0])
        if it == 0:
            print(f"loss0 = {episode_loss}")
        print(f"iter {it}: loss = {episode_loss:.4f}  dloss/dwind = {grad_total.numpy()[0]}")
        wp.launch(sim.sgd_step, dim=1, inputs=[wind, grad_total, 0.01])


if __name__ == "__main__":
    main()
