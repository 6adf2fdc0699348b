"""Buggy (WF601): one tape per step, its backward inside the loop, every step adding into one loss zeroed once
per episode; more steps than the probe's cap on checked backwards. The fix: one tape over the steps, one
backward after the loop. The initial state is set on the host each episode and its gradient never zeroed:
nothing reads it, so that is no WF903.
"""

import numpy as np
import warp as wp
from common_kernels import sgd, sq_loss, step

N = 4
STEPS = 40


def main():
    k = wp.array(np.linspace(1.0, 2.0, N).astype(np.float32), requires_grad=True)
    target = wp.zeros(N, dtype=float)
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    vs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(2):
        xs[0].assign(np.linspace(0.5, 1.0, N).astype(np.float32))
        loss.zero_()
        k.grad.zero_()
        for t in range(STEPS):
            tape = wp.Tape()
            with tape:
                wp.launch(step, dim=N, inputs=[xs[t], vs[t], k], outputs=[xs[t + 1], vs[t + 1]])
                wp.launch(sq_loss, dim=N, inputs=[xs[t + 1], target, loss])
            tape.backward(loss)
        print(f"loss {it} {loss.numpy()[0]:.9g}")
        wp.launch(sgd, dim=N, inputs=[k, k.grad, 0.01])


if __name__ == "__main__":
    main()
