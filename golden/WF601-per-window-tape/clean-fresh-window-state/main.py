"""Learn a constant wind that keeps a thrown spray of particles close to a target.

Truncated on purpose: every window is an independent throw that starts from the initial state, so
nothing carries between the per-window tapes and the summed gradient is exact.
"""

import warp as wp

import sim

WINDOWS = 4
ITERS = 3


def main():
    wind = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
    grad_total = wp.zeros(1, dtype=wp.vec3)
    for it in range(ITERS):
        grad_total.zero_()
        total_loss = 0.0
        for window in range(WINDOWS):
            state = sim.State()
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            tape = wp.Tape()
            with tape:
                sim.simulate_frame(state, wind, loss)
            tape.backward(loss)
            wp.launch(sim.accumulate, dim=1, inputs=[grad_total, wind.grad])
            tape.zero()
            total_loss += float(loss.numpy()[0])
        if it == 0:
            print(f"loss0 = {total_loss}")
        print(f"iter {it}: loss = {total_loss:.4f}  dloss/dwind = {grad_total.numpy()[0]}")
        wp.launch(sim.sgd_step, dim=1, inputs=[wind, grad_total, 0.01])


if __name__ == "__main__":
    main()
