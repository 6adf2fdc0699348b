"""Throw a swarm of particles so that their centre of mass lands on a target: optimise their initial
velocities. In the shape of newton's example_diffsim_cloth.py: forward + backward are captured once in
a CUDA graph when the device is a GPU (``wp.ScopedCapture``) and every iteration replays it; on the CPU
the same step runs eagerly. The centre of mass is accumulated atomically, so ``forward()`` resets it
before the accumulation.
The look-alike: the reset stays, but it runs in ``step()`` after the backward, before the next
rollout: the tape has consumed the centre of mass by then, so nothing is reported."""

import numpy as np
import warp as wp

N = 16
STEPS = 4
DT = 0.1


@wp.kernel
def advance(x: wp.array(dtype=wp.vec2), v0: wp.array(dtype=wp.vec2), dt: float, x_next: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    x_next[i] = x[i] + dt * v0[i] + wp.vec2(0.0, -0.5 * dt * dt)


@wp.kernel
def centre(x: wp.array(dtype=wp.vec2), n: int, com: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    wp.atomic_add(com, 0, x[i] / float(n))


@wp.kernel
def target_loss(com: wp.array(dtype=wp.vec2), target: wp.vec2, loss: wp.array(dtype=float)):
    d = com[0] - target
    loss[0] = wp.dot(d, d)


@wp.kernel
def sgd(v: wp.array(dtype=wp.vec2), g: wp.array(dtype=wp.vec2), lr: float):
    i = wp.tid()
    v[i] = v[i] - lr * g[i]


class Example:
    def __init__(self):
        rng = np.random.default_rng(7)
        self.v0 = wp.array(rng.uniform(-1.0, 1.0, (N, 2)), dtype=wp.vec2, requires_grad=True)
        self.xs = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)]
        self.xs[0].assign(rng.uniform(-0.2, 0.2, (N, 2)))
        self.com = wp.zeros(1, dtype=wp.vec2, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.target = wp.vec2(0.5, 0.2)
        self.graph = None
        if wp.get_device().is_cuda:
            with wp.ScopedCapture() as capture:
                self.forward_backward()
            self.graph = capture.graph

    def forward_backward(self):
        self.tape = wp.Tape()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)

    def forward(self):
        for t in range(STEPS):
            wp.launch(advance, dim=N, inputs=[self.xs[t], self.v0, DT], outputs=[self.xs[t + 1]])
        wp.launch(centre, dim=N, inputs=[self.xs[-1], N, self.com])
        wp.launch(target_loss, dim=1, inputs=[self.com, self.target, self.loss])

    def step(self):
        if self.graph is not None:
            wp.capture_launch(self.graph)
        else:
            self.forward_backward()
        wp.launch(sgd, dim=N, inputs=[self.v0, self.v0.grad, 0.5])
        self.tape.zero()
        self.com.zero_()


if __name__ == "__main__":
    example = Example()
    for it in range(4):
        example.step()
        if it == 0:
            print(f"loss0 = {example.loss.numpy()[0]}")
            print(f"forward: x_last = {example.xs[-1].numpy()[2]}")
        print(f"v0 = {example.v0.numpy()[2]}")
    print(f"loss = {example.loss.numpy()[0]}")
