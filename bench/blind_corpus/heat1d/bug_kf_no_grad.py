"""1-D nonlinear heat equation: recover a heat source profile and the base
conductivity from a measured final temperature profile (functional style)."""

import numpy as np
import warp as wp
import warp.optim

wp.config.log_level = wp.LOG_WARNING
wp.set_device("cpu")

N = 32
STEPS = 40
DT = 0.1
BETA = 2.0


@wp.kernel
def face_conductivity(u: wp.array(dtype=float), kappa: wp.array(dtype=float), beta: float, kf: wp.array(dtype=float)):
    # conductivity on the face between cell i-1 and cell i (faces 1..n-1)
    i = wp.tid() + 1
    um = 0.5 * (u[i - 1] + u[i])
    kf[i] = kappa[0] * (1.0 + beta * um * um)


@wp.kernel
def heat_update(
    u_in: wp.array(dtype=float),
    kf: wp.array(dtype=float),
    src: wp.array(dtype=float),
    dt: float,
    u_out: wp.array(dtype=float),
):
    i = wp.tid()
    n = u_in.shape[0]
    flux_in = float(0.0)
    flux_out = float(0.0)
    if i > 0:
        flux_in = kf[i] * (u_in[i - 1] - u_in[i])
    if i < n - 1:
        flux_out = kf[i + 1] * (u_in[i] - u_in[i + 1])
    u_out[i] = u_in[i] + dt * (flux_in - flux_out + src[i])


@wp.kernel
def mse(u: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = u[i] - target[i]
    wp.atomic_add(loss, 0, d * d / float(u.shape[0]))


def heat_step(u_in, u_out, kf, src, kappa, dt):
    wp.launch(face_conductivity, dim=N - 1, inputs=[u_in, kappa, BETA], outputs=[kf])
    wp.launch(heat_update, dim=N, inputs=[u_in, kf, src, dt], outputs=[u_out])


def simulate(u0, src, kappa, us, kfs):
    wp.copy(us[0], u0)
    for t in range(len(kfs)):
        heat_step(us[t], us[t + 1], kfs[t], src, kappa, DT)


def objective(u0, src, kappa, us, kfs, target, loss):
    tape = wp.Tape()
    with tape:
        simulate(u0, src, kappa, us, kfs)
        wp.launch(mse, dim=N, inputs=[us[-1], target], outputs=[loss])
    return tape


def make_problem():
    xs = np.linspace(0.0, 1.0, N, dtype=np.float32)
    u0 = wp.array(np.exp(-((xs - 0.3) ** 2) / 0.02).astype(np.float32), dtype=float)
    target = wp.array((0.4 + 0.3 * np.sin(np.pi * xs)).astype(np.float32), dtype=float)
    src = wp.zeros(N, dtype=float, requires_grad=True)
    kappa = wp.array([0.2], dtype=float, requires_grad=True)
    return u0, target, src, kappa


if __name__ == "__main__":
    u0, target, src, kappa = make_problem()
    us = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    kfs = [wp.zeros(N, dtype=float) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    opt = warp.optim.SGD([src, kappa], lr=0.5)

    for it in range(4):
        loss.zero_()
        tape = objective(u0, src, kappa, us, kfs, target, loss)
        tape.backward(loss)
        print(f"loss {it} {loss.numpy()[0]:.9g}")
        if it == 0:
            print("grad", "src", np.array2string(src.grad.numpy().ravel()[:8], precision=9))
            print("grad", "kappa", np.array2string(kappa.grad.numpy().ravel()[:8], precision=9))
        opt.step([src.grad, kappa.grad])
        tape.zero()
