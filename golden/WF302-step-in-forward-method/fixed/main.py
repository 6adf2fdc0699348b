"""Aim a drag-damped projectile at a target by learning its launch velocity. The trainer records the
flight in forward() and runs the backward in backward(); the script's loop calls one after the other.
The SGD step sits in forward()'s tape block, before the backward that produces the gradient it reads:
it steps on a zeroed gradient (the tape's reset clears it), and the backward replays it."""

import warp as wp
import warp.optim

STEPS = 30
DT = 0.02


@wp.kernel
def fly(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    drag: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vn = v[i] + dt * (wp.vec3(0.0, -9.8, 0.0) - drag * v[i])
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def miss(x: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Thrower:
    def __init__(self, lr):
        self.x = [wp.zeros(1, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS + 1)]
        self.v = [wp.zeros(1, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS + 1)]
        self.v0 = wp.array([wp.vec3(2.0, 3.0, 0.5)], dtype=wp.vec3, requires_grad=True)
        self.target = wp.vec3(2.5, 0.0, 0.0)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()
        self.optimizer = warp.optim.SGD([self.v0], lr=lr)

    def forward(self):
        self.tape.reset()
        self.loss.zero_()
        with self.tape:
            wp.copy(self.v[0], self.v0)
            for t in range(STEPS):
                wp.launch(fly, 1, inputs=[self.x[t], self.v[t], 0.3, DT], outputs=[self.x[t + 1], self.v[t + 1]])
            wp.launch(miss, 1, inputs=[self.x[STEPS], self.target], outputs=[self.loss])
        return self.loss

    def backward(self):
        self.tape.backward(self.loss)


if __name__ == "__main__":
    wp.set_device("cpu")
    thrower = Thrower(lr=0.02)
    for it in range(4):
        thrower.forward()
        thrower.backward()
        # descend on the launch velocity
        thrower.optimizer.step([thrower.v0.grad])
        if it == 0:
            print(f"loss0 = {thrower.loss.numpy()[0]}")
            print(f"forward: x_end = {thrower.x[STEPS].numpy()[0].tolist()}")
    print(f"loss = {thrower.loss.numpy()[0]}")
