"""Flocking simulation used by the route trainer (see ok.py).

Agents follow a virtual leader that moves along a piecewise-linear route through
a list of waypoints, keep their distance from each other and align their
velocities. Everything lives on per-step arrays so one tape can cover a rollout.
"""

import numpy as np
import warp as wp


@wp.func
def leader_position(waypoints: wp.array(dtype=wp.vec2), s: float):
    # s in [0, 1] along the route; piecewise-linear through the waypoints
    k = waypoints.shape[0] - 1
    u = s * float(k)
    seg = wp.min(int(u), k - 1)
    a = u - float(seg)
    return waypoints[seg] * (1.0 - a) + waypoints[seg + 1] * a


@wp.kernel
def flock_forces(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    sep_strength: float,
    sep_radius: float,
    align: float,
    force: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    n = x.shape[0]
    xi = x[i]
    f = wp.vec2(0.0)
    vsum = wp.vec2(0.0)
    for j in range(n):
        if j != i:
            d = xi - x[j]
            r = wp.length(d)
            f += (d / r) * sep_strength * wp.exp(-r / sep_radius)
        vsum += v[j]
    f += align * (vsum / float(n) - v[i])
    wp.atomic_add(force, i, f)


@wp.kernel
def leader_pull(
    x: wp.array(dtype=wp.vec2),
    waypoints: wp.array(dtype=wp.vec2),
    s: float,
    stiffness: float,
    force: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    target = leader_position(waypoints, s)
    wp.atomic_add(force, i, stiffness * (target - x[i]))


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    force: wp.array(dtype=wp.vec2),
    drag: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    vn = v[i] + dt * (force[i] - drag * v[i])
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def obstacle_cost(
    x: wp.array(dtype=wp.vec2),
    center: wp.vec2,
    radius: float,
    softness: float,
    weight: float,
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    depth = (radius - wp.length(x[i] - center)) / softness
    # softplus barrier, written in its overflow-safe form
    wp.atomic_add(loss, 0, weight * softness * (wp.max(depth, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(depth)))))


@wp.kernel
def goal_cost(x: wp.array(dtype=wp.vec2), goal: wp.vec2, weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - goal
    wp.atomic_add(loss, 0, weight * wp.dot(d, d))


@wp.kernel
def smoothness_cost(waypoints: wp.array(dtype=wp.vec2), weight: float, loss: wp.array(dtype=float)):
    k = wp.tid()
    d = waypoints[k + 1] - waypoints[k]
    wp.atomic_add(loss, 0, weight * wp.dot(d, d))


class Flock:
    def __init__(self, n_agents=16, steps=48, dt=0.05, seed=3):
        self.n = n_agents
        self.steps = steps
        self.dt = dt
        self.sep_strength = 0.8
        self.sep_radius = 0.15
        self.align = 0.5
        self.pull = 2.0
        self.drag = 0.8

        self.obstacle = wp.vec2(1.0, 0.05)
        self.obstacle_radius = 0.35

        rng = np.random.default_rng(seed)
        start = rng.normal(scale=0.15, size=(n_agents, 2)).astype(np.float32)
        self.x0 = wp.array(start, dtype=wp.vec2)

        self.x = [wp.zeros(n_agents, dtype=wp.vec2, requires_grad=True) for _ in range(steps + 1)]
        self.v = [wp.zeros(n_agents, dtype=wp.vec2, requires_grad=True) for _ in range(steps + 1)]
        self.force = wp.zeros(n_agents, dtype=wp.vec2, requires_grad=True)

    def reset(self):
        wp.copy(self.x[0], self.x0)
        self.v[0].zero_()

    def step(self, t, waypoints, loss):
        s = (t + 1) / self.steps
        self.force.zero_()
        wp.launch(
            flock_forces,
            self.n,
            inputs=[self.x[t], self.v[t], self.sep_strength, self.sep_radius, self.align],
            outputs=[self.force],
        )
        wp.launch(leader_pull, self.n, inputs=[self.x[t], waypoints, s, self.pull], outputs=[self.force])
        wp.launch(
            integrate,
            self.n,
            inputs=[self.x[t], self.v[t], self.force, self.drag, self.dt],
            outputs=[self.x[t + 1], self.v[t + 1]],
        )
        wp.launch(
            obstacle_cost,
            self.n,
            inputs=[self.x[t + 1], self.obstacle, self.obstacle_radius, 0.05, 10.0 / (self.n * self.steps)],
            outputs=[loss],
        )

    def run_segment(self, first, last, waypoints, loss):
        for t in range(first, last):
            self.step(t, waypoints, loss)

    def final_cost(self, waypoints, goal, loss):
        wp.launch(goal_cost, self.n, inputs=[self.x[-1], goal, 1.0 / self.n], outputs=[loss])
        wp.launch(smoothness_cost, waypoints.shape[0] - 1, inputs=[waypoints, 0.05], outputs=[loss])
