"""A look-alike of buggy/ that is correct: the forward clears the final positions before the
rollout writes them, not after the loss has read them (zeroing before the first read is fine)."""

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
def ring_loss(x: wp.array(dtype=wp.vec2), radius: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = wp.length(x[i]) - radius
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(v: wp.array(dtype=wp.vec2), g: wp.array(dtype=wp.vec2), lr: float):
    i = wp.tid()
    v[i] = v[i] - lr * g[i]


class Example:
    def __init__(self):
        rng = np.random.default_rng(5)
        self.v0 = wp.array(rng.uniform(-1.0, 1.0, (N, 2)), dtype=wp.vec2, requires_grad=True)
        self.xs = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)]
        self.xs[0].assign(rng.uniform(-0.2, 0.2, (N, 2)))
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
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
        self.loss.zero_()
        self.xs[-1].zero_()
        for t in range(STEPS):
            wp.launch(advance, dim=N, inputs=[self.xs[t], self.v0, DT], outputs=[self.xs[t + 1]])
        wp.launch(ring_loss, dim=N, inputs=[self.xs[-1], 1.5], outputs=[self.loss])

    def step(self):
        if self.graph is not None:
            wp.capture_launch(self.graph)
        else:
            self.forward_backward()
        wp.launch(sgd, dim=N, inputs=[self.v0, self.v0.grad, 0.05])
        self.tape.zero()


if __name__ == "__main__":
    example = Example()
    for it in range(4):
        example.step()
        if it == 0:
            print(f"loss0 = {example.loss.numpy()[0]}")
            print(f"forward: x1 = {example.xs[1].numpy()[2]}")
    print(f"loss = {example.loss.numpy()[0]}")
