"""Learn a constant wind that keeps a thrown spray of particles close to a target over an episode.

The episode is simulated frame by frame; the objective is the sum of the per-frame distances.
"""

import warp as wp

import sim

FRAMES = 4
ITERS = 3


def main():
    wind = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
    for it in range(ITERS):
        state = sim.State()
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for frame in range(FRAMES):
                sim.simulate_frame(state, wind, loss)
        tape.backward(loss)
        episode_loss = float(loss.numpy()[0])
        if it == 0:
            print(f"loss0 = {episode_loss:.6f}")
        print(f"iter {it}: loss = {episode_loss:.4f}  dloss/dwind = {wind.grad.numpy()[0]}")
        wp.launch(sim.sgd_step, dim=1, inputs=[wind, wind.grad, 0.01])
        tape.zero()


if __name__ == "__main__":
    main()
