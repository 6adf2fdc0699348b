"""Spinning tops thrown at targets: rigid bodies with quaternion attitude and a world-frame inertia tensor.

A small reusable trainer base class owns the tape, the backward pass and the Adam step; the subclass only says
how to simulate and how to score. Buffers live in a dict of per-step lists.
"""

import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True

DT = 1.0 / 60.0
STEPS = 40
GRAVITY = wp.constant(wp.vec3(0.0, -9.81, 0.0))


@wp.kernel
def rigid_step(
    x: wp.array(dtype=wp.vec3),
    q: wp.array(dtype=wp.quat),
    v: wp.array(dtype=wp.vec3),
    w: wp.array(dtype=wp.vec3),
    inertia: wp.array(dtype=wp.mat33),
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    q_out: wp.array(dtype=wp.quat),
    v_out: wp.array(dtype=wp.vec3),
    w_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    R = wp.quat_to_matrix(q[i])
    I_w = R * inertia[i] * wp.transpose(R)
    wi = w[i]
    # torque-free Euler equations in the world frame: I dw/dt = -w x (I w)
    dw = wp.inverse(I_w) * wp.cross(I_w * wi, wi)
    w_new = wi + dw * dt
    v_new = v[i] + GRAVITY * dt
    x_out[i] = x[i] + v_new * dt
    dq = wp.quat(w_new[0], w_new[1], w_new[2], 0.0) * q[i]
    q_out[i] = wp.normalize(q[i] + dq * (0.5 * dt))
    w_out[i] = w_new
    v_out[i] = v_new


@wp.kernel
def apply_drag(v: wp.array(dtype=wp.vec3), c: float, dt: float):
    i = wp.tid()
    v[i] *= 1.0 / (1.0 + c * dt * wp.length(v[i]))


@wp.kernel
def marker_world(
    x: wp.array(dtype=wp.vec3),
    q: wp.array(dtype=wp.quat),
    marker: wp.array(dtype=wp.vec3),
    out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    tf = wp.transform(x[i], q[i])
    out[i] = wp.transform_point(tf, marker[i])


@wp.kernel
def target_cost(p: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = p[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Trainer:
    """Generic tape + Adam loop; subclasses provide params(), simulate() and compute_loss()."""

    def __init__(self, lr):
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.opt = warp.optim.Adam(self.params(), lr=lr)
        self.tape = None

    def params(self):
        raise NotImplementedError

    def simulate(self):
        raise NotImplementedError

    def compute_loss(self):
        raise NotImplementedError

    def iteration(self, it):
        self.loss.zero_()
        self.tape = wp.Tape()
        with self.tape:
            self.simulate()
            self.compute_loss()
        self.tape.backward(self.loss)
        self.report(it)
        self.opt.step([p.grad for p in self.params()])
        self.tape.zero()

    def report(self, it):
        print(f"loss {it} {self.loss.numpy()[0]:.9g}")
        if it == 0:
            for name, p in zip(self.param_names, self.params()):
                print(f"grad {name} [{' '.join('%.9g' % g for g in p.grad.numpy().ravel())}]")


class TopSpin(Trainer):
    param_names = ("v0", "w0")

    def __init__(self, n=3, lr=0.05):
        rng = np.random.default_rng(7)
        self.n = n
        self.v0 = wp.array(rng.uniform(-1.0, 1.0, (n, 3)) + [0.0, 3.0, 2.0], dtype=wp.vec3, requires_grad=True)
        self.w0 = wp.array(rng.uniform(-4.0, 4.0, (n, 3)), dtype=wp.vec3, requires_grad=True)
        diag = rng.uniform(0.5, 2.0, (n, 3))
        self.inertia = wp.array([np.diag(d) for d in diag], dtype=wp.mat33)
        self.marker = wp.array(rng.uniform(-0.3, 0.3, (n, 3)), dtype=wp.vec3)
        self.target = wp.array(rng.uniform(-0.5, 0.5, (n, 3)) + [0.0, -0.8, 1.4], dtype=wp.vec3)
        q0 = rng.normal(size=(n, 4))
        self.q0 = wp.array(q0 / np.linalg.norm(q0, axis=1, keepdims=True), dtype=wp.quat)
        self.x0 = wp.zeros(n, dtype=wp.vec3)
        self.buf = {
            "x": [wp.zeros(n, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS + 1)],
            "q": [wp.zeros(n, dtype=wp.quat, requires_grad=True) for _ in range(STEPS + 1)],
            "v": [wp.zeros(n, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS + 1)],
            "w": [wp.zeros(n, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS + 1)],
            "vd": [wp.zeros(n, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS)],
        }
        self.world = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        super().__init__(lr)

    def params(self):
        return [self.v0, self.w0]

    def simulate(self):
        b = self.buf
        wp.copy(b["x"][0], self.x0)
        wp.copy(b["q"][0], self.q0)
        wp.copy(b["v"][0], self.v0)
        wp.copy(b["w"][0], self.w0)
        for t in range(STEPS):
            wp.launch(apply_drag, dim=self.n, inputs=[b["v"][t], 0.8, DT])
            wp.launch(
                rigid_step,
                dim=self.n,
                inputs=[b["x"][t], b["q"][t], b["v"][t], b["w"][t], self.inertia, DT],
                outputs=[b["x"][t + 1], b["q"][t + 1], b["v"][t + 1], b["w"][t + 1]],
            )

    def compute_loss(self):
        b = self.buf
        wp.launch(marker_world, dim=self.n, inputs=[b["x"][STEPS], b["q"][STEPS], self.marker], outputs=[self.world])
        wp.launch(target_cost, dim=self.n, inputs=[self.world, self.target], outputs=[self.loss])


def main():
    with wp.ScopedDevice("cpu"):
        trainer = TopSpin()
        for it in range(5):
            trainer.iteration(it)


if __name__ == "__main__":
    main()
