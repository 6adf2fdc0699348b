"""Correct, in the shape of newton's diffsim examples: forward + backward captured once with
wp.ScopedCapture, replayed by wp.capture_launch each iteration; the backward is seeded with grads=;
a zero-size and an integer array ride along, a parameter is held in a struct.

    python captured.py [--bug alias] [--seed-by-hand]
"""

import sys

import numpy as np
import warp as wp

N = 8
STEPS = 6


@wp.struct
class Params:
    k: wp.array(dtype=float)


@wp.kernel
def step(x: wp.array(dtype=float), p: Params, idx: wp.array(dtype=int), empty: wp.array(dtype=float),
         x_out: wp.array(dtype=float)):
    i = wp.tid()
    x_out[i] = x[i] + 0.1 * wp.sin(p.k[idx[i]] * x[i])


@wp.kernel
def cost(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i] * x[i]


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class Example:
    def __init__(self, alias: bool, by_hand: bool):
        self.alias = alias
        self.by_hand = by_hand
        self.params = Params()
        self.params.k = wp.array(np.linspace(0.5, 1.5, N, dtype=np.float32), requires_grad=True)
        self.idx = wp.array(np.arange(N, dtype=np.int32))
        self.empty = wp.zeros(0, dtype=float, requires_grad=True)
        self.states = [wp.array(np.linspace(0.2, 1.0, N, dtype=np.float32), requires_grad=True)]
        self.states += [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS)]
        self.costs = wp.zeros(N, dtype=float, requires_grad=True)
        self.seed = wp.array(np.linspace(1.0, 2.0, N, dtype=np.float32))
        with wp.ScopedCapture() as capture:
            self.forward_backward()
        self.graph = capture.graph

    def forward_backward(self):
        self.tape = wp.Tape()
        with self.tape:
            for t in range(STEPS):
                # the bug: one state object as input and output (`solver.step(s, s, ...)`)
                x, out = (self.states[0], self.states[0]) if self.alias else (self.states[t], self.states[t + 1])
                wp.launch(step, dim=N, inputs=[x, self.params, self.idx, self.empty], outputs=[out])
            wp.launch(cost, dim=N, inputs=[self.states[0] if self.alias else self.states[-1], self.costs])
        if self.by_hand:
            self.costs.grad.assign(self.seed)
            self.tape.backward()
        else:
            self.tape.backward(grads={self.costs: self.seed})

    def step(self):
        wp.capture_launch(self.graph)
        wp.launch(sgd, dim=N, inputs=[self.params.k, self.params.k.grad, 0.01])
        self.tape.zero()


if __name__ == "__main__":
    ex = Example(alias="--bug" in sys.argv, by_hand="--seed-by-hand" in sys.argv)
    for _ in range(3):
        ex.step()
    print("objective", float(np.dot(ex.seed.numpy(), ex.costs.numpy())))
