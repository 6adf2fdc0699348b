"""Learn a constant wind that keeps a thrown spray of particles close to a target over an episode.

The episode is simulated frame by frame; the objective is the sum of the per-frame distances.
"""

import warp as wp

import sim

FRAMES = 4
ITERS = 3


@wp.kernel
def accumulate_loss(term: wp.array(dtype=float), total: wp.array(dtype=float)):
    """Add one window's loss to the episode loss, on the tape (warpfix WF601)."""
    wp.atomic_add(total, 0, term[0])


def main():
    wind = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
    for it in range(ITERS):
        state = sim.State()
        episode_loss = 0.0
        loss_total = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for frame in range(FRAMES):
                loss = wp.zeros(1, dtype=float, requires_grad=True)
                sim.simulate_frame(state, wind, loss)
                wp.launch(accumulate_loss, dim=1, inputs=[loss], outputs=[loss_total])
                episode_loss += float(loss.numpy()[0])
        tape.backward(loss_total)
        if it == 0:
            print(f"loss0 = {episode_loss}")
        print(f"iter {it}: loss = {episode_loss:.4f}  dloss/dwind = {wind.grad.numpy()[0]}")
        wp.launch(sim.sgd_step, dim=1, inputs=[wind, wind.grad, 0.01])
        tape.zero()


if __name__ == "__main__":
    main()
