"""Tune the two gains of a PD controller that brings a batch of point masses to rest at a target.

The trainer keeps one state buffer per step and one loss array: `reset()` zeroes the loss once per
episode and every step adds its weighted tracking cost into it. To keep the tape short, the episode
records one tape per step and calls `self.tape.backward(self.loss)` after each: the state still
carries from one step into the next, so the summed gradient drops every path through the state.
"""

import numpy as np
import warp as wp

N = 4
STEPS = 8
DT = 0.05
ITERS = 3
LR = 2.0


@wp.kernel
def control(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    gains: wp.array(dtype=float),
    target: wp.vec2,
    force: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    force[i] = -gains[0] * (x[i] - target) - gains[1] * v[i]


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    force: wp.array(dtype=wp.vec2),
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    v_new = v[i] + dt * force[i]
    v_out[i] = v_new
    x_out[i] = x[i] + dt * v_new


@wp.kernel
def tracking_cost(x: wp.array(dtype=wp.vec2), target: wp.vec2, weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target
    wp.atomic_add(loss, 0, weight * wp.dot(d, d))


@wp.kernel
def sgd(param: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    param[i] = param[i] - lr * grad[i]


class PDTrainer:
    def __init__(self):
        self.target = wp.vec2(1.0, 0.5)
        start = np.array([[0.0, 0.0], [0.2, -0.1], [-0.3, 0.4], [0.1, 0.3]], dtype=np.float32)
        self.x0 = wp.array(start, dtype=wp.vec2)
        self.x = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)]
        self.v = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)]
        self.force = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS)]
        self.gains = wp.array([2.0, 0.5], dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()

    def reset(self):
        wp.copy(self.x[0], self.x0)
        self.v[0].zero_()
        self.loss.zero_()

    def advance(self, t):
        wp.launch(control, N, inputs=[self.x[t], self.v[t], self.gains, self.target], outputs=[self.force[t]])
        wp.launch(
            integrate, N, inputs=[self.x[t], self.v[t], self.force[t], DT], outputs=[self.x[t + 1], self.v[t + 1]]
        )
        weight = (t + 1) / (STEPS * N)
        wp.launch(tracking_cost, N, inputs=[self.x[t + 1], self.target, weight], outputs=[self.loss])

    def forward_backward(self):
        self.reset()
        self.gains.grad.zero_()
        self.tape = wp.Tape()
        with self.tape:
            for t in range(STEPS):
                self.advance(t)
        self.tape.backward(self.loss)

    def step(self):
        wp.launch(sgd, 2, inputs=[self.gains, self.gains.grad, LR])
        self.tape.zero()


def main():
    trainer = PDTrainer()
    for it in range(ITERS):
        trainer.forward_backward()
        if it == 0:
            print(f"loss0 = {trainer.loss.numpy()[0]}")
            print(f"forward: x_final = {trainer.x[STEPS].numpy().tolist()}")
        print(f"iter {it}: loss = {trainer.loss.numpy()[0]:.6f}  grad = {trainer.gains.grad.numpy()}")
        trainer.step()


if __name__ == "__main__":
    main()
