"""A look-alike of buggy/ that is correct: the speeds are clamped in place after the optimizer
step, outside the graph and the tape (a projection onto the feasible set), as Warp's own examples
do; nothing a tape recorded is overwritten before its backward."""

import sys

import numpy as np
import warp as wp

N = 16
STEPS = 5
DT = 0.1


@wp.kernel
def clamp_speed(v: wp.array(dtype=wp.vec2), vmax: float):
    i = wp.tid()
    s = wp.length(v[i])
    if s > vmax:
        v[i] = v[i] * (vmax / s)


@wp.kernel
def advance(x0: wp.array(dtype=wp.vec2), v0: wp.array(dtype=wp.vec2), t: float, x: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    x[i] = x0[i] + t * v0[i] + wp.vec2(0.0, -0.5 * t * t)


@wp.kernel
def ring_loss(x: wp.array(dtype=wp.vec2), radius: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = wp.length(x[i]) - radius
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(v: wp.array(dtype=wp.vec2), g: wp.array(dtype=wp.vec2), lr: float):
    i = wp.tid()
    v[i] = v[i] - lr * g[i]


class Example:
    def __init__(self, capture: bool):
        rng = np.random.default_rng(3)
        self.x0 = wp.array(rng.uniform(-0.2, 0.2, (N, 2)), dtype=wp.vec2)
        self.v0 = wp.array(rng.uniform(-1.0, 1.0, (N, 2)), dtype=wp.vec2, requires_grad=True)
        self.x = wp.zeros(N, dtype=wp.vec2, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.graph = None
        if capture:
            with wp.ScopedCapture() as graph:
                self.forward_backward()
            self.graph = graph.graph

    def forward_backward(self):
        self.tape = wp.Tape()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)

    def forward(self):
        self.loss.zero_()
        wp.launch(advance, dim=N, inputs=[self.x0, self.v0, STEPS * DT], outputs=[self.x])
        wp.launch(ring_loss, dim=N, inputs=[self.x, 1.5], outputs=[self.loss])

    def step(self):
        if self.graph is not None:
            wp.capture_launch(self.graph)
        else:
            self.forward_backward()
        wp.launch(sgd, dim=N, inputs=[self.v0, self.v0.grad, 0.02])
        wp.launch(clamp_speed, dim=N, inputs=[self.v0, 1.0])
        self.tape.zero()


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        example = Example(capture="--eager" not in sys.argv)
        for it in range(4):
            example.step()
            if it == 0:
                print(f"loss0 = {example.loss.numpy()[0]}")
                print(f"forward: x2 = {example.x.numpy()[2]}")
        print(f"loss = {example.loss.numpy()[0]}")
