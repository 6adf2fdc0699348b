"""Train a saturated linear feedback controller that holds a double pendulum at a pose.

Four rollouts start from different hanging configurations. A shared controller
tau = tau_max * tanh((K x + b) / tau_max) drives both joints; the objective is a
time-weighted tip-tracking cost plus a small effort penalty, summed over the rollout.
K (2x4) and b (2) are trained with warp.optim.Adam.

    python ok.py
"""

import math

import numpy as np
import warp as wp
import warp.optim

M1, M2 = 1.0, 1.0
L1, L2 = 0.5, 0.5
GRAVITY = 9.81
JOINT_DAMPING = 0.05
TAU_MAX = 8.0
EFFORT = 1.0e-3


@wp.func
def tip_position(th: wp.vec2):
    return wp.vec2(L1 * wp.sin(th[0]) + L2 * wp.sin(th[1]), -L1 * wp.cos(th[0]) - L2 * wp.cos(th[1]))


@wp.kernel
def feedback(
    theta: wp.array(dtype=wp.vec2),
    omega: wp.array(dtype=wp.vec2),
    gains: wp.array(dtype=float),
    theta_ref: wp.vec2,
    tau_raw: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    e = theta[i] - theta_ref
    w = omega[i]
    u0 = gains[0] * e[0] + gains[1] * e[1] + gains[2] * w[0] + gains[3] * w[1] + gains[8]
    u1 = gains[4] * e[0] + gains[5] * e[1] + gains[6] * w[0] + gains[7] * w[1] + gains[9]
    tau_raw[i] = wp.vec2(u0, u1)


@wp.kernel
def saturate(tau_raw: wp.array(dtype=wp.vec2), tau_max: float, tau: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    u = tau_raw[i]
    tau[i] = wp.vec2(tau_max * wp.tanh(u[0] / tau_max), tau_max * wp.tanh(u[1] / tau_max))


@wp.kernel
def integrate(
    theta: wp.array(dtype=wp.vec2),
    omega: wp.array(dtype=wp.vec2),
    tau: wp.array(dtype=wp.vec2),
    dt: float,
    theta_out: wp.array(dtype=wp.vec2),
    omega_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    th = theta[i]
    w = omega[i]
    d = th[0] - th[1]
    c = wp.cos(d)
    s = wp.sin(d)

    mass = wp.mat22(
        (M1 + M2) * L1 * L1, M2 * L1 * L2 * c,
        M2 * L1 * L2 * c, M2 * L2 * L2,
    )
    coriolis = wp.vec2(M2 * L1 * L2 * s * w[1] * w[1], -M2 * L1 * L2 * s * w[0] * w[0])
    grav = wp.vec2((M1 + M2) * GRAVITY * L1 * wp.sin(th[0]), M2 * GRAVITY * L2 * wp.sin(th[1]))

    acc = wp.inverse(mass) * (tau[i] - coriolis - grav - JOINT_DAMPING * w)

    w_new = w + dt * acc
    omega_out[i] = w_new
    theta_out[i] = th + dt * w_new


@wp.kernel
def running_cost(
    theta: wp.array(dtype=wp.vec2),
    tau: wp.array(dtype=wp.vec2),
    tip_ref: wp.vec2,
    weight: float,
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    r = tip_position(theta[i]) - tip_ref
    u = tau[i]
    wp.atomic_add(loss, 0, weight * wp.dot(r, r) + EFFORT * wp.dot(u, u) / float(theta.shape[0]))


class HoldTrainer:
    def __init__(self, start_angles, theta_ref, steps=80, dt=0.01, lr=0.2):
        self.steps = steps
        self.dt = dt
        self.batch = len(start_angles)
        self.theta_ref = wp.vec2(*theta_ref)
        self.tip_ref = tip_position_np(theta_ref)

        self.theta0 = wp.array(np.asarray(start_angles, dtype=np.float32), dtype=wp.vec2)

        def states(n):
            return [wp.zeros(self.batch, dtype=wp.vec2, requires_grad=True) for _ in range(n)]

        self.theta = states(steps + 1)
        self.omega = [wp.zeros(self.batch, dtype=wp.vec2, requires_grad=True)] * (steps + 1)
        self.tau_raw = states(steps)
        self.tau = states(steps)

        k = np.array([-10.0, 0.0, -1.5, 0.0, 0.0, -5.0, 0.0, -0.8, 0.0, 0.0], dtype=np.float32)
        self.gains = wp.array(k, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

        self.tape = wp.Tape()
        self.optimizer = warp.optim.Adam([self.gains], lr=lr)
        self.iteration = 0

    def reset_episode(self):
        wp.copy(self.theta[0], self.theta0)
        self.omega[0].zero_()
        self.loss.zero_()

    def advance(self, t):
        n = self.batch
        wp.launch(feedback, n, inputs=[self.theta[t], self.omega[t], self.gains, self.theta_ref], outputs=[self.tau_raw[t]])
        wp.launch(saturate, n, inputs=[self.tau_raw[t], TAU_MAX], outputs=[self.tau[t]])
        wp.launch(
            integrate,
            n,
            inputs=[self.theta[t], self.omega[t], self.tau[t], self.dt],
            outputs=[self.theta[t + 1], self.omega[t + 1]],
        )
        weight = (t + 1) / (self.steps * n)
        wp.launch(running_cost, n, inputs=[self.theta[t + 1], self.tau[t], self.tip_ref, weight], outputs=[self.loss])

    def rollout(self):
        for t in range(self.steps):
            self.advance(t)

    def forward(self):
        self.tape.reset()
        self.reset_episode()
        with self.tape:
            self.rollout()
        return self.loss

    def backward(self):
        self.tape.backward(self.loss)

    def step(self):
        self.optimizer.step([self.gains.grad])
        self.iteration += 1

    def train(self, iterations):
        for it in range(iterations):
            self.forward()
            self.backward()
            print("loss %d %.9g" % (it, self.loss.numpy()[0]))
            if it == 0:
                print("grad gains", fmt(self.gains.grad.numpy()))
            self.step()


def tip_position_np(th):
    return wp.vec2(
        L1 * math.sin(th[0]) + L2 * math.sin(th[1]),
        -L1 * math.cos(th[0]) - L2 * math.cos(th[1]),
    )


def fmt(a):
    return "[" + ", ".join("%.9g" % x for x in np.asarray(a).ravel()) + "]"


if __name__ == "__main__":
    wp.set_device("cpu")
    starts = [(0.0, 0.0), (0.3, 0.1), (-0.2, 0.4), (0.5, -0.3)]
    trainer = HoldTrainer(starts, theta_ref=(0.6, -0.3))
    trainer.train(5)
