"""Plan a control sequence for a point mass: every window adds its tracking cost into one array, and the
backward is seeded through that array's gradient (newton's drone style: `costs.grad.fill_(1.0)`)."""

import warp as wp

WINDOWS = 4
STEPS = 3
DT = 0.1
ITERS = 3
LR = 0.5


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec2),
    qd: wp.array(dtype=wp.vec2),
    controls: wp.array(dtype=wp.vec2),
    t: int,
    dt: float,
    q_out: wp.array(dtype=wp.vec2),
    qd_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    v = qd[i] + dt * controls[t]
    qd_out[i] = v
    q_out[i] = q[i] + dt * v


@wp.kernel
def tracking_cost(q: wp.array(dtype=wp.vec2), target: wp.vec2, costs: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target
    wp.atomic_add(costs, 0, wp.dot(d, d))


@wp.kernel
def descend(x: wp.array(dtype=wp.vec2), grad: wp.array(dtype=wp.vec2), rate: float):
    i = wp.tid()
    x[i] = x[i] - grad[i] * rate


class State:
    def __init__(self):
        self.q = wp.zeros(1, dtype=wp.vec2, requires_grad=True)
        self.qd = wp.zeros(1, dtype=wp.vec2, requires_grad=True)


class Planner:
    def __init__(self):
        self.states = [State() for _ in range(WINDOWS * STEPS + 1)]
        self.controls = wp.zeros(WINDOWS * STEPS, dtype=wp.vec2, requires_grad=True)
        self.costs = wp.zeros(1, dtype=float, requires_grad=True)
        self.target = wp.vec2(1.0, 0.5)

    def window(self, w):
        for s in range(STEPS):
            t = w * STEPS + s
            wp.launch(
                integrate,
                dim=1,
                inputs=[self.states[t].q, self.states[t].qd, self.controls, t, DT],
                outputs=[self.states[t + 1].q, self.states[t + 1].qd],
            )
        wp.launch(tracking_cost, dim=1, inputs=[self.states[(w + 1) * STEPS].q, self.target], outputs=[self.costs])

    def forward_backward(self):
        self.costs.zero_()
        self.tape = wp.Tape()
        with self.tape:
            for w in range(WINDOWS):
                self.window(w)
        self.costs.grad.fill_(1.0)
        self.tape.backward()

    def step(self):
        self.forward_backward()
        wp.launch(descend, dim=len(self.controls), inputs=[self.controls, self.controls.grad, LR])
        self.tape.zero()


def main():
    planner = Planner()
    for it in range(ITERS):
        planner.step()
        if it == 0:
            print(f"loss0 = {planner.costs.numpy()[0]}")
        print(f"iter {it}: cost = {planner.costs.numpy()[0]:.5f}")


if __name__ == "__main__":
    main()
