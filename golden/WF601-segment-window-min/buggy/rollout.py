"""A particle under a constant push, stepped with a state per step; the rollout is driven in segments."""

import warp as wp

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
    v = 0.95 * qd[i] + dt * (push[0] + wp.vec3(0.0, -9.8, 0.0))
    qd_out[i] = v
    q_out[i] = q[i] + dt * v


@wp.kernel
def distance(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[0] - target
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Rollout:
    def __init__(self, steps=10):
        self.steps = steps
        self.q = [wp.zeros(1, dtype=wp.vec3, requires_grad=True) for _ in range(steps + 1)]
        self.qd = [wp.zeros(1, dtype=wp.vec3, requires_grad=True) for _ in range(steps + 1)]
        self.qd[0].assign([wp.vec3(1.0, 2.0, 0.0)])

    def run_segment(self, first, last, push):
        for t in range(first, last):
            wp.launch(
                integrate,
                dim=1,
                inputs=[self.q[t], self.qd[t], push, DT],
                outputs=[self.q[t + 1], self.qd[t + 1]],
            )
