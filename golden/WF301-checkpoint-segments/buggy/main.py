"""Optimise the initial positions of particles in a swirl so that they end on targets, with checkpointed
gradients (like Warp's example_fluid_checkpoint): the forward keeps the state at the start of each
segment; the backward replays the segments in reverse, each on its own tape, seeds each with the start
gradient the later segment handed on, and hands its own start gradient to the earlier one. The state
arrays are reused by every segment, so each segment must clear its gradients once it handed them on
(`self.tape.zero()` in the `if segment > 0:` arm) -- but not the first segment's, which the optimizer
reads. Without that zero, every segment's backward adds into the gradients the previous one left."""

import numpy as np
import warp as wp

N = 16
SEGMENTS = 3
SEG_STEPS = 2
DT = 0.1


@wp.kernel
def swirl(x: wp.array(dtype=wp.vec2), dt: float, x_new: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    p = x[i]
    x_new[i] = p + dt * wp.vec2(-wp.sin(p[1]), wp.sin(p[0]))


@wp.kernel
def distance(x: wp.array(dtype=wp.vec2), target: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def descend(x: wp.array(dtype=wp.vec2), grad: wp.array(dtype=wp.vec2), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


class Example:
    def __init__(self):
        rng = np.random.default_rng(5)
        self.x = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(SEG_STEPS + 1)]
        self.x[0].assign(rng.standard_normal((N, 2)))
        self.start = [wp.zeros(N, dtype=wp.vec2) for _ in range(SEGMENTS)]
        self.target = wp.array(rng.standard_normal((N, 2)), dtype=wp.vec2)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.saved = wp.zeros(N, dtype=wp.vec2)
        self.tape = None

    def run_segment(self):
        for t in range(SEG_STEPS):
            wp.launch(swirl, dim=N, inputs=[self.x[t], DT], outputs=[self.x[t + 1]])

    def forward(self):
        self.loss.zero_()
        for segment in range(SEGMENTS):
            wp.copy(self.start[segment], self.x[0])
            self.run_segment()
            if segment < SEGMENTS - 1:
                wp.copy(self.x[0], self.x[SEG_STEPS])
        wp.launch(distance, dim=N, inputs=[self.x[SEG_STEPS], self.target], outputs=[self.loss])

    def backward(self):
        for segment in range(SEGMENTS - 1, -1, -1):
            wp.copy(self.x[0], self.start[segment])
            with wp.Tape() as self.tape:
                self.run_segment()
                if segment == SEGMENTS - 1:
                    wp.launch(distance, dim=N, inputs=[self.x[SEG_STEPS], self.target], outputs=[self.loss])
            if segment == SEGMENTS - 1:
                self.loss.grad.fill_(1.0)
            else:
                wp.copy(self.x[SEG_STEPS].grad, self.saved)
            self.tape.backward()
            if segment > 0:
                # hand the start gradient on to the earlier segment
                wp.copy(self.saved, self.x[0].grad)


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        example = Example()
        for it in range(4):
            example.forward()
            if it == 0:
                print(f"loss0 = {example.loss.numpy()[0]}")
            print(f"iter {it}: loss = {example.loss.numpy()[0]:.6f}")
            example.backward()
            wp.launch(descend, dim=N, inputs=[example.x[0], example.x[0].grad, 0.05])
            example.tape.zero()
