"""Throw a swarm of particles onto a ring: optimise their initial velocities. In the shape of
newton's diffsim cloth example, forward + backward are captured once in a graph
(``wp.ScopedCapture``, which Warp also records on the CPU) and every iteration replays it with
``wp.capture_launch`` (``--eager``: no graph, the same step run eagerly); the optimizer step runs
outside the graph, on the velocities it reads.
The bug: the recorded forward clamps the speeds in place (``v[i] = v[i] * (vmax / s)``, WF106),
so the backward reads the clamped values where it needs the original ones.

The usual fix (a fresh output, the name rebound after the launch) is wrong here: the graph
replays the launches on the arrays of its capture and never the rebinding, so the optimizer
would update an array the replays no longer read (and, run eagerly, it would read the new
output's gradient, which the backward clears). ``warpfix apply`` refuses; fixed/ shows the fix
by hand (a buffer allocated before the capture)."""

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
        wp.launch(clamp_speed, dim=N, inputs=[self.v0, 1.0])
        wp.launch(advance, dim=N, inputs=[self.x0, self.v0, STEPS * DT], outputs=[self.x])
        wp.launch(ring_loss, dim=N, inputs=[self.x, 1.5], outputs=[self.loss])

    def step(self):
        if self.graph is not None:
            wp.capture_launch(self.graph)
        else:
            self.forward_backward()
        wp.launch(sgd, dim=N, inputs=[self.v0, self.v0.grad, 0.02])
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
