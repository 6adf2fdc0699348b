"""Fit the constant push that carries a particle onto a target, with warp.optim.SGD. The planner hands
out its trainable arrays through a parameters() accessor, as torch modules do."""

import warp as wp
import warp.optim

STEPS = 6
DT = 0.05


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    push: wp.array(dtype=wp.vec3),
    dt: float,
    q_out: wp.array(dtype=wp.vec3),
    qd_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    v = qd[i] + dt * (push[0] + wp.vec3(0.0, -9.8, 0.0))
    qd_out[i] = v
    q_out[i] = q[i] + dt * v


@wp.kernel
def distance(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[0] - target
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Planner:
    def __init__(self):
        self.push = wp.array([wp.vec3(0.0, 5.0, 0.0)], dtype=wp.vec3, requires_grad=True)
        self.q = [wp.zeros(1, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS + 1)]
        self.qd = [wp.zeros(1, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS + 1)]
        self.qd[0].assign([wp.vec3(1.0, 2.0, 0.0)])
        self.target = wp.vec3(1.0, 0.5, 0.0)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def parameters(self):
        return [self.push]

    def objective(self):
        self.loss.zero_()
        for t in range(STEPS):
            wp.launch(
                integrate,
                dim=1,
                inputs=[self.q[t], self.qd[t], self.push, DT],
                outputs=[self.q[t + 1], self.qd[t + 1]],
            )
        wp.launch(distance, dim=1, inputs=[self.q[STEPS], self.target], outputs=[self.loss])
        return self.loss


def train(planner, optimizer, iterations):
    for it in range(iterations):
        tape = wp.Tape()
        with tape:
            loss = planner.objective()
        tape.backward(loss)
        optimizer.step([p.grad for p in planner.parameters()])
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        print(f"iter {it}: loss = {loss.numpy()[0]:.5f}  grad = {planner.push.grad.numpy()[0]}")
        tape.zero()


if __name__ == "__main__":
    planner = Planner()
    optimizer = warp.optim.SGD(planner.parameters(), lr=0.05)
    train(planner, optimizer, iterations=3)
