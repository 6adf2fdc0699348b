"""Open-loop torque plan for a batch of rigid spacecraft attitude slews.

Three spacecraft with different (non-diagonal) inertia tensors must rotate from
the identity attitude to their own target quaternions and come to rest. The
torque at each step is a free parameter (vec3 per craft per step). Rigid-body
dynamics use Euler's equations with wp.mat33 inertia and wp.quat attitudes.
The plan is trained with warp.optim.SGD (momentum).

    python ok.py
"""

import numpy as np
import warp as wp
import warp.optim

STEPS = 60
DT = 0.05
EFFORT = 2.0e-3
RATE_WEIGHT = 0.5
TRACK_WEIGHT = 0.05
TORQUE_LIMIT = 0.25


@wp.kernel
def rigid_step(
    q: wp.array(dtype=wp.quat),
    omega: wp.array(dtype=wp.vec3),
    torque: wp.array(dtype=wp.vec3),
    inertia: wp.array(dtype=wp.mat33),
    inertia_inv: wp.array(dtype=wp.mat33),
    t: int,
    dt: float,
    q_out: wp.array(dtype=wp.quat),
    omega_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    n = q.shape[0]
    w = omega[i]
    tau = torque[t * n + i]
    I = inertia[i]

    # Euler's equations in the body frame
    w_dot = inertia_inv[i] * (tau - wp.cross(w, I * w))
    w_new = w + dt * w_dot

    # attitude kinematics: q_dot = 1/2 q (x) (w, 0)
    qi = q[i]
    q_dot = qi * wp.quat(w_new[0], w_new[1], w_new[2], 0.0)
    q_out[i] = wp.normalize(qi + q_dot * (0.5 * dt))
    omega_out[i] = w_new


@wp.kernel
def attitude_error(q: wp.array(dtype=wp.quat), q_target: wp.array(dtype=wp.quat), err: wp.array(dtype=float)):
    i = wp.tid()
    c = wp.dot(q[i], q_target[i])
    err[i] = 1.0 - c * c


@wp.kernel
def tracking_cost(err: wp.array(dtype=float), weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, weight * err[i])


@wp.kernel
def terminal_cost(
    err: wp.array(dtype=float),
    omega: wp.array(dtype=wp.vec3),
    rate_weight: float,
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    w = omega[i]
    # sqrt(1 - c^2) = |sin(angle)|: a robust attitude error
    wp.atomic_add(loss, 0, wp.sqrt(err[i] + 1.0e-4) + rate_weight * wp.dot(w, w))


@wp.kernel
def clamp_torque(limit: float, torque: wp.array(dtype=wp.vec3)):
    k = wp.tid()
    u = torque[k]
    torque[k] = wp.vec3(wp.clamp(u[0], -limit, limit), wp.clamp(u[1], -limit, limit), wp.clamp(u[2], -limit, limit))


@wp.kernel
def effort_cost(torque: wp.array(dtype=wp.vec3), weight: float, loss: wp.array(dtype=float)):
    k = wp.tid()
    u = torque[k]
    wp.atomic_add(loss, 0, weight * wp.dot(u, u))


def random_inertia(rng, n):
    mats = []
    for _ in range(n):
        a = rng.normal(size=(3, 3))
        rot, _ = np.linalg.qr(a)
        d = np.diag(rng.uniform(0.8, 2.0, size=3))
        mats.append(rot @ d @ rot.T)
    return np.array(mats, dtype=np.float32)


def axis_angle_quat(axis, angle):
    axis = np.asarray(axis, dtype=np.float64)
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([axis * np.sin(0.5 * angle), [np.cos(0.5 * angle)]]).astype(np.float32)


class SlewPlanner:
    def __init__(self, seed=1):
        rng = np.random.default_rng(seed)
        self.n = 3
        I = random_inertia(rng, self.n)
        self.inertia = wp.array(I, dtype=wp.mat33)
        self.inertia_inv = wp.array(np.linalg.inv(I).astype(np.float32), dtype=wp.mat33)
        axes = np.array([(1.0, 0.0, 0.0), (0.2, 1.0, 0.3), (-0.5, 0.4, 1.0)])
        angles = (0.9, 1.2, 0.7)
        self.q_target = wp.array(np.stack([axis_angle_quat(a, b) for a, b in zip(axes, angles)]), dtype=wp.quat)

        self.q = [wp.zeros(self.n, dtype=wp.quat, requires_grad=True) for _ in range(STEPS + 1)]
        self.omega = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
        self.err = [wp.zeros(self.n, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
        self.q[0].fill_(wp.quat_identity())

        # initial guess: bang-bang about each target axis (accelerate, then brake)
        guess = np.zeros((STEPS, self.n, 3), dtype=np.float32)
        unit = axes / np.linalg.norm(axes, axis=1, keepdims=True)
        guess[: STEPS // 2] = 0.3 * unit
        guess[STEPS // 2 :] = -0.3 * unit
        self.torque = wp.array(guess.reshape(-1, 3), dtype=wp.vec3, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def parameters(self):
        return [self.torque]

    def simulate_step(self, t):
        wp.launch(
            rigid_step,
            self.n,
            inputs=[self.q[t], self.omega, self.torque, self.inertia, self.inertia_inv, t, DT],
            outputs=[self.q[t + 1], self.omega],
        )
        wp.launch(attitude_error, self.n, inputs=[self.q[t + 1], self.q_target], outputs=[self.err[t + 1]])
        wp.launch(tracking_cost, self.n, inputs=[self.err[t + 1], TRACK_WEIGHT * DT], outputs=[self.loss])

    def final_costs(self):
        wp.launch(terminal_cost, self.n, inputs=[self.err[STEPS], self.omega, RATE_WEIGHT], outputs=[self.loss])
        wp.launch(effort_cost, STEPS * self.n, inputs=[self.torque, EFFORT * DT], outputs=[self.loss])

    def objective(self):
        self.loss.zero_()
        self.omega.zero_()
        for t in range(STEPS):
            self.simulate_step(t)
        self.final_costs()
        return self.loss

    def project(self):
        # actuator limits: each torque component is bounded
        wp.launch(clamp_torque, STEPS * self.n, inputs=[TORQUE_LIMIT], outputs=[self.torque])


def fmt(a):
    return "[" + ", ".join("%.9g" % x for x in np.asarray(a).ravel()) + "]"


def run(planner, optimizer, iterations):
    for it in range(iterations):
        tape = wp.Tape()
        with tape:
            loss = planner.objective()
        tape.backward(loss)

        print("loss %d %.9g" % (it, loss.numpy()[0]))
        if it == 0:
            print("grad torque", fmt(planner.torque.grad.numpy()[:3]))

        optimizer.step([p.grad for p in planner.parameters()])
        planner.project()
        tape.zero()


if __name__ == "__main__":
    wp.set_device("cpu")
    planner = SlewPlanner()
    optimizer = warp.optim.SGD(planner.parameters(), lr=2.0, momentum=0.5)
    run(planner, optimizer, iterations=5)
