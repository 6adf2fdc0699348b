"""Steer a swarm of particles towards a ring: optimise a per-particle initial velocity. Like Warp's
navier_stokes example, the trainer captures forward + backward in a CUDA graph when it can and
runs the same step eagerly (a fresh tape per iteration) when it cannot, e.g. on the CPU. The
graph path clears the gradient in its reset graph; the eager path forgets to."""

import numpy as np
import warp as wp
import warp.optim

N = 16
STEPS = 5
DT = 0.1


@wp.kernel
def advance(x0: wp.array(dtype=wp.vec2), v0: wp.array(dtype=wp.vec2), t: float, x: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    drift = wp.vec2(0.0, -0.5 * t * t)
    x[i] = x0[i] + t * v0[i] + drift


@wp.kernel
def ring_loss(x: wp.array(dtype=wp.vec2), radius: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = wp.length(x[i]) - radius
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def clamp_speed(v: wp.array(dtype=wp.vec2), vmax: float):
    i = wp.tid()
    s = wp.length(v[i])
    if s > vmax:
        v[i] = v[i] * (vmax / s)


class Example:
    def __init__(self):
        rng = np.random.default_rng(3)
        self.x0 = wp.array(rng.uniform(-0.2, 0.2, (N, 2)), dtype=wp.vec2)
        self.v0 = wp.array(rng.uniform(-1.0, 1.0, (N, 2)), dtype=wp.vec2, requires_grad=True)
        self.x = wp.zeros(N, dtype=wp.vec2, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.optimizer = wp.optim.SGD([self.v0], lr=0.02)
        self.tape = None
        self.use_graph = wp.get_device().is_cuda
        if self.use_graph:
            self.tape = wp.Tape()
            with wp.ScopedCapture() as capture:
                with self.tape:
                    self.forward()
                self.tape.backward(self.loss)
            self.graph = capture.graph
            with wp.ScopedCapture() as capture:
                wp.launch(clamp_speed, dim=N, inputs=[self.v0, 2.0])
                self.tape.zero()
            self.reset_graph = capture.graph

    def forward(self):
        self.loss.zero_()
        wp.launch(advance, dim=N, inputs=[self.x0, self.v0, STEPS * DT], outputs=[self.x])
        wp.launch(ring_loss, dim=N, inputs=[self.x, 1.5], outputs=[self.loss])

    def step(self):
        if self.use_graph:
            wp.capture_launch(self.graph)
        else:
            self.tape = wp.Tape()
            with self.tape:
                self.forward()
            self.tape.backward(self.loss)
        self.optimizer.step([self.v0.grad])
        self.tape.zero()
        if self.use_graph:
            wp.capture_launch(self.reset_graph)
        else:
            wp.launch(clamp_speed, dim=N, inputs=[self.v0, 2.0])


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        example = Example()
        for it in range(4):
            example.step()
            if it == 0:
                print(f"loss0 = {example.loss.numpy()[0]}")
                print(f"forward: x2 = {example.x.numpy()[2]}")
        print(f"loss = {example.loss.numpy()[0]}")
