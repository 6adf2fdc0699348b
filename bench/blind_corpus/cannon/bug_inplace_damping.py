"""Projectile aiming: learn launch velocities so that drag-affected
projectiles land on their targets after a fixed flight time."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.set_device("cpu")


@wp.func
def wind_at(x: wp.vec3, shear: float):
    # horizontal wind that grows with altitude
    return wp.vec3(shear * wp.max(x[1], 0.0), 0.0, 0.0)


@wp.func
def drag_accel(v: wp.vec3, wind: wp.vec3, cd: float):
    v_rel = v - wind
    return -cd * wp.length(v_rel) * v_rel


@wp.kernel
def integrate(
    x_in: wp.array(dtype=wp.vec3),
    v_in: wp.array(dtype=wp.vec3),
    gravity: wp.vec3,
    cd: float,
    shear: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    v = v_in[i]
    a = gravity + drag_accel(v, wind_at(x_in[i], shear), cd)
    v_new = v + a * dt
    x_out[i] = x_in[i] + v_new * dt
    v_out[i] = v_new


@wp.kernel
def damp(v: wp.array(dtype=wp.vec3), k: float):
    # speed-dependent damping (fast projectiles lose more energy)
    i = wp.tid()
    v[i] /= 1.0 + k * wp.length(v[i])


@wp.kernel
def landing_loss(x: wp.array(dtype=wp.vec3), targets: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - targets[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def sgd_update(p: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class CannonTrainer:
    def __init__(self, n=4, steps=24, dt=0.02, lr=0.05):
        self.n = n
        self.steps = steps
        self.dt = dt
        self.lr = lr
        self.cd = 0.05
        self.air = 0.02
        self.shear = 0.8
        self.gravity = wp.vec3(0.0, -9.8, 0.0)

        rng = np.random.default_rng(3)
        x0 = np.zeros((n, 3), dtype=np.float32)
        x0[:, 0] = np.arange(n) * 0.5
        v0 = np.tile(np.array([3.0, 4.0, 0.0], dtype=np.float32), (n, 1))
        tgt = x0 + np.array([1.5, 0.2, 0.0], dtype=np.float32) + 0.1 * rng.standard_normal((n, 3)).astype(np.float32)

        self.x_init = wp.array(x0, dtype=wp.vec3)
        self.targets = wp.array(tgt, dtype=wp.vec3)

        self.xs = [wp.zeros(n, dtype=wp.vec3, requires_grad=True) for _ in range(steps + 1)]
        self.vs = [wp.zeros(n, dtype=wp.vec3, requires_grad=True) for _ in range(steps + 1)]
        self.vs[0].assign(v0)
        self.launch_velocity = self.vs[0]

        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()

    def forward(self):
        for t in range(self.steps):
            wp.launch(
                integrate,
                dim=self.n,
                inputs=[self.xs[t], self.vs[t], self.gravity, self.cd, self.shear, self.dt],
                outputs=[self.xs[t + 1], self.vs[t + 1]],
            )
            wp.launch(damp, dim=self.n, inputs=[self.vs[t + 1], self.air])
        wp.launch(landing_loss, dim=self.n, inputs=[self.xs[-1], self.targets], outputs=[self.loss])

    def step(self):
        wp.copy(self.xs[0], self.x_init)
        self.loss.zero_()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)
        grad = self.launch_velocity.grad.numpy().copy()
        wp.launch(sgd_update, dim=self.n, inputs=[self.launch_velocity, self.launch_velocity.grad, self.lr])
        self.tape.reset()
        return grad


def run(example, iters):
    for it in range(iters):
        grad = example.step()
        print(f"loss {it} {example.loss.numpy()[0]:.9g}")
        if it == 0:
            print("grad", "launch_velocity", np.array2string(grad.ravel()[:8], precision=9))


if __name__ == "__main__":
    run(CannonTrainer(), 4)
