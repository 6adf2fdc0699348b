"""Throw a particle so that it lands on a target: the initial velocity is optimised through a rollout
of FRAMES frames of SUBSTEPS steps each, one backward per training iteration (newton's diffsim style)."""

import warp as wp

FRAMES = 4
SUBSTEPS = 3
DT = 0.05
ITERS = 3
LR = 0.05


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    dt: float,
    q_out: wp.array(dtype=wp.vec3),
    qd_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    v = qd[i] + dt * wp.vec3(0.0, -9.8, 0.0)
    qd_out[i] = v
    q_out[i] = q[i] + dt * v


@wp.kernel
def distance(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[0] - target
    loss[0] = wp.dot(d, d)


@wp.kernel
def step_kernel(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), rate: float):
    i = wp.tid()
    x[i] = x[i] - grad[i] * rate


class State:
    """Position and velocity of the particle at one step."""

    def __init__(self):
        self.q = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
        self.qd = wp.zeros(1, dtype=wp.vec3, requires_grad=True)


class Example:
    def __init__(self):
        self.states = [State() for _ in range(FRAMES * SUBSTEPS + 1)]
        self.states[0].qd.assign([wp.vec3(1.0, 2.0, 0.0)])
        self.target = wp.vec3(1.0, 0.2, 0.0)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def simulate(self, frame):
        for i in range(SUBSTEPS):
            t = frame * SUBSTEPS + i
            wp.launch(
                integrate,
                dim=1,
                inputs=[self.states[t].q, self.states[t].qd, DT],
                outputs=[self.states[t + 1].q, self.states[t + 1].qd],
            )

    def forward_backward(self):
        self.tape = wp.Tape()
        with self.tape:
            for frame in range(FRAMES):
                self.simulate(frame)
            wp.launch(distance, dim=1, inputs=[self.states[-1].q, self.target], outputs=[self.loss])
        self.tape.backward(self.loss)

    def step(self):
        self.forward_backward()
        x = self.states[0].qd
        wp.launch(step_kernel, dim=1, inputs=[x, x.grad, LR])
        self.tape.zero()


def main():
    example = Example()
    for it in range(ITERS):
        example.step()
        if it == 0:
            print(f"loss0 = {example.loss.numpy()[0]}")
        print(f"iter {it}: loss = {example.loss.numpy()[0]:.5f}  qd0 = {example.states[0].qd.numpy()[0]}")


if __name__ == "__main__":
    main()
