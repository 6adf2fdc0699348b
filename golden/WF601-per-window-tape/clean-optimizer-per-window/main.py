"""Learn a constant wind that keeps a thrown spray of particles close to a target.

Online learning: the optimizer steps after every frame, so each backward belongs to its own
optimisation step (the training loop) and no gradients are summed across frames.
"""

import warp as wp

import sim

FRAMES = 4
EPISODES = 3


def main():
    wind = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
    for episode in range(EPISODES):
        state = sim.State()
        episode_loss = 0.0
        for frame in range(FRAMES):
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            tape = wp.Tape()
            with tape:
                sim.simulate_frame(state, wind, loss)
            tape.backward(loss)
            wp.launch(sim.sgd_step, dim=1, inputs=[wind, wind.grad, 0.01])
            tape.zero()
            episode_loss += float(loss.numpy()[0])
        if episode == 0:
            print(f"loss0 = {episode_loss}")
        print(f"episode {episode}: loss = {episode_loss:.4f}  wind = {wind.numpy()[0]}")


if __name__ == "__main__":
    main()
