"""A swarm of point masses steered to a goal by a two-gain feedback policy; `Model.step` advances one substep."""

import numpy as np
import warp as wp

N = 12
DT = 0.05
FRICTION = 0.2
GOAL = wp.vec2(1.0, 0.5)


@wp.kernel
def policy(
    q: wp.array(dtype=wp.vec2),
    qd: wp.array(dtype=wp.vec2),
    gains: wp.array(dtype=float),
    goal: wp.vec2,
    ctrl: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    ctrl[i] = gains[0] * (goal - q[i]) - gains[1] * qd[i]


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec2),
    qd: wp.array(dtype=wp.vec2),
    ctrl: wp.array(dtype=wp.vec2),
    dt: float,
    q_out: wp.array(dtype=wp.vec2),
    qd_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    vel = qd[i] + dt * (ctrl[i] - FRICTION * qd[i])
    qd_out[i] = vel
    q_out[i] = q[i] + dt * vel


@wp.kernel
def goal_loss(q: wp.array(dtype=wp.vec2), goal: wp.vec2, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - goal
    wp.atomic_add(loss, 0, wp.dot(d, d))


class State:
    """Positions and velocities of the swarm."""

    def __init__(self, n):
        self.q = wp.zeros(n, dtype=wp.vec2, requires_grad=True)
        self.qd = wp.zeros(n, dtype=wp.vec2, requires_grad=True)


class Model:
    """The swarm's start configuration and its time stepping."""

    def __init__(self, n):
        rng = np.random.default_rng(3)
        self.n = n
        self.q0 = rng.uniform(-1.0, 1.0, (n, 2)).astype(np.float32)
        self.qd0 = rng.uniform(-0.5, 0.5, (n, 2)).astype(np.float32)

    def state(self):
        return State(self.n)

    def reset(self, state):
        state.q.assign(self.q0)
        state.qd.assign(self.qd0)

    def step(self, state_in, state_out, ctrl, dt):
        wp.launch(
            integrate,
            dim=self.n,
            inputs=[state_in.q, state_in.qd, ctrl, dt],
            outputs=[state_out.q, state_out.qd],
        )
