"""Fit the stiffness k of a few frames of a spring so that the last state is near a target: which tapes
record the frames. Modes (the first flag given):

* (none) one tape around the frame loop and the loss, one backward (correct);
* ``--per-frame``: a new tape every frame, the loss on the last one, one backward after the loop: the loss
  depends on every earlier frame's launch, recorded on tapes nobody backwards (WF601, the truncation);
* ``--segments``: a tape per segment of frames, kept; the last segment backwarded from the loss, then each
  earlier one seeded with the gradient the later one left at the boundary state (correct);
* ``--checkpoint``: the frames run on no tape, the tape records the loss and one ``record_func`` adjoint
  that re-records the frames from the saved start state and backwards them (a checkpointed custom
  backward, correct);
* ``--reset``: one tape, reset between two independent episodes of the iteration (each from its own start
  state, their gradients summed outside the tape: correct).
"""

import sys

import numpy as np
import warp as wp
from common_kernels import add_to, sgd, sq_loss, step

N = 8
FRAMES = 4


def simulate(xs, vs, k, first, last):
    for f in range(first, last):
        wp.launch(step, dim=N, inputs=[xs[f], vs[f], k], outputs=[xs[f + 1], vs[f + 1]])


def main(mode: str):
    rng = np.random.default_rng(2)
    k = wp.array(rng.uniform(1.0, 2.0, N).astype(np.float32), requires_grad=True)
    target = wp.array(rng.uniform(-0.2, 0.2, N).astype(np.float32))
    x0 = np.linspace(0.5, 1.0, N).astype(np.float32)
    for it in range(3):
        xs = [wp.array(x0, requires_grad=True)] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(FRAMES)]
        vs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(FRAMES + 1)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        if mode == "per-frame":
            for f in range(FRAMES):
                tape = wp.Tape()
                with tape:
                    simulate(xs, vs, k, f, f + 1)
            with tape:
                wp.launch(sq_loss, dim=N, inputs=[xs[FRAMES], target, loss])
            tape.backward(loss)
        elif mode == "segments":
            half = FRAMES // 2
            first, second = wp.Tape(), wp.Tape()
            with first:
                simulate(xs, vs, k, 0, half)
            with second:
                simulate(xs, vs, k, half, FRAMES)
                wp.launch(sq_loss, dim=N, inputs=[xs[FRAMES], target, loss])
            second.backward(loss)
            first.backward(grads={xs[half]: xs[half].grad, vs[half]: vs[half].grad})
        elif mode == "checkpoint":
            simulate(xs, vs, k, 0, FRAMES)
            tape = wp.Tape()
            with tape:
                wp.launch(sq_loss, dim=N, inputs=[xs[FRAMES], target, loss])

                def replay_frames(xs=xs, vs=vs):
                    inner = wp.Tape()
                    with inner:
                        simulate(xs, vs, k, 0, FRAMES)
                    inner.backward(grads={xs[FRAMES]: xs[FRAMES].grad, vs[FRAMES]: vs[FRAMES].grad})

                tape.record_func(replay_frames, arrays=[k, xs[0], vs[0], xs[FRAMES], vs[FRAMES]])
            tape.backward(loss)
        elif mode == "reset":
            tape = wp.Tape()
            total, grad_sum = 0.0, wp.zeros(N, dtype=float)
            for episode in range(2):
                tape.reset()
                xs[0].assign(x0 * (1.0 + 0.5 * episode))
                loss.zero_()
                with tape:
                    simulate(xs, vs, k, 0, FRAMES)
                    wp.launch(sq_loss, dim=N, inputs=[xs[FRAMES], target, loss])
                tape.backward(loss)
                wp.launch(add_to, dim=N, inputs=[grad_sum, k.grad])
                total += float(loss.numpy()[0])
            loss.assign([total])
            wp.copy(k.grad, grad_sum)
        else:
            tape = wp.Tape()
            with tape:
                simulate(xs, vs, k, 0, FRAMES)
                wp.launch(sq_loss, dim=N, inputs=[xs[FRAMES], target, loss])
            tape.backward(loss)
        print(f"iter {it}: loss = {loss.numpy()[0]:.6f}")
        wp.launch(sgd, dim=N, inputs=[k, k.grad, 0.05])
        k.grad.zero_()


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        given = [a[2:] for a in sys.argv[1:] if a.startswith("--")]
        main(given[0] if given else "")
