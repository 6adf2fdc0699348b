"""Source and diffusivity recovery for a 2-D advection-diffusion-reaction plume.

A tracer is released by an unknown source field into a rotating flow, diffuses
with an unknown diffusivity and grows logistically. A coarse sensor grid sees the
concentration at the end of the window. We recover the source field and the
(log) diffusivity with warp.optim.Adam, re-using one tape across iterations.

    python ok.py
"""

import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True

N = 32  # cells per side
STEPS = 40
DT = 0.02
GROWTH = 0.8  # logistic growth rate
SENSOR_STRIDE = 4
TIKHONOV = 1.0e-4


@wp.func
def sample(u: wp.array2d(dtype=float), i: int, j: int):
    # zero-flux boundary: clamp to the nearest interior cell
    n = u.shape[0]
    return u[wp.clamp(i, 0, n - 1), wp.clamp(j, 0, n - 1)]


@wp.kernel
def transport(
    u: wp.array2d(dtype=float),
    vel: wp.array2d(dtype=wp.vec2),
    source: wp.array2d(dtype=float),
    log_kappa: wp.array(dtype=float),
    dt: float,
    inv_dx: float,
    u_out: wp.array2d(dtype=float),
):
    i, j = wp.tid()

    c = u[i, j]
    v = vel[i, j]
    kappa = wp.exp(log_kappa[0])

    # first-order upwind advection
    if v[0] > 0.0:
        dudx = (c - sample(u, i - 1, j)) * inv_dx
    else:
        dudx = (sample(u, i + 1, j) - c) * inv_dx
    if v[1] > 0.0:
        dudy = (c - sample(u, i, j - 1)) * inv_dx
    else:
        dudy = (sample(u, i, j + 1) - c) * inv_dx

    lap = (sample(u, i - 1, j) + sample(u, i + 1, j) + sample(u, i, j - 1) + sample(u, i, j + 1) - 4.0 * c) * inv_dx * inv_dx

    u_out[i, j] = c + dt * (kappa * lap - v[0] * dudx - v[1] * dudy + source[i, j])


@wp.kernel
def react(u: wp.array2d(dtype=float), rate: float, dt: float):
    i, j = wp.tid()
    c = u[i, j]
    u[i, j] = c + dt * rate * c * (1.0 - c)


@wp.kernel
def sensor_misfit(
    u: wp.array2d(dtype=float),
    obs: wp.array2d(dtype=float),
    stride: int,
    weight: float,
    loss: wp.array(dtype=float),
):
    si, sj = wp.tid()
    r = u[si * stride + stride // 2, sj * stride + stride // 2] - obs[si, sj]
    wp.atomic_add(loss, 0, weight * r * r)


@wp.kernel
def tikhonov(source: wp.array2d(dtype=float), beta: float, loss: wp.array(dtype=float)):
    i, j = wp.tid()
    s = source[i, j]
    wp.atomic_add(loss, 0, beta * s * s)


def rotating_flow(n, omega=1.0, drift=(0.15, 0.0)):
    x = (np.arange(n) + 0.5) / n
    X, Y = np.meshgrid(x, x, indexing="ij")
    vx = -omega * (Y - 0.5) + drift[0]
    vy = omega * (X - 0.5) + drift[1]
    return wp.array(np.stack([vx, vy], axis=-1).astype(np.float32), dtype=wp.vec2)


def blobs(n, centers, width, amp):
    x = (np.arange(n) + 0.5) / n
    X, Y = np.meshgrid(x, x, indexing="ij")
    s = np.zeros((n, n))
    for (cx, cy), a in zip(centers, amp):
        s += a * np.exp(-((X - cx) ** 2 + (Y - cy) ** 2) / (2.0 * width**2))
    return s.astype(np.float32)


def allocate(n, steps, requires_grad):
    u = [wp.zeros((n, n), dtype=float, requires_grad=requires_grad) for _ in range(steps + 1)]
    mid = [wp.zeros((n, n), dtype=float, requires_grad=requires_grad) for _ in range(steps)]
    return u, mid


def simulate(u, mid, vel, source, log_kappa):
    n = u[0].shape[0]
    for t in range(len(mid)):
        wp.launch(transport, dim=(n, n), inputs=[u[t], vel, source, log_kappa, DT, float(n)], outputs=[u[t + 1]])
        wp.launch(react, dim=(n, n), inputs=[u[t + 1], GROWTH, DT])


def objective(u, mid, vel, source, log_kappa, obs, loss):
    simulate(u, mid, vel, source, log_kappa)
    m = obs.shape[0]
    wp.launch(sensor_misfit, dim=(m, m), inputs=[u[-1], obs, SENSOR_STRIDE, 1.0 / (m * m)], outputs=[loss])
    wp.launch(tikhonov, dim=source.shape, inputs=[source, TIKHONOV], outputs=[loss])


def make_sweeps(vel, count=3, noise=2.0e-3, seed=7):
    """Synthetic sensor sweeps: the true plume read out `count` times with sensor noise."""
    true_source = wp.array(blobs(N, [(0.3, 0.35), (0.65, 0.6)], 0.08, [1.5, 1.0]), dtype=float)
    true_log_kappa = wp.array([np.log(3.0e-3)], dtype=float)
    u, mid = allocate(N, STEPS, requires_grad=False)
    simulate(u, mid, vel, true_source, true_log_kappa)
    k = SENSOR_STRIDE
    clean = u[-1].numpy()[k // 2 :: k, k // 2 :: k]
    rng = np.random.default_rng(seed)
    return [(clean + noise * rng.standard_normal(clean.shape)).astype(np.float32) for _ in range(count)]


def fmt(a, k=6):
    return "[" + ", ".join("%.9g" % x for x in np.asarray(a).ravel()[:k]) + "]"


def main(iterations=5):
    vel = rotating_flow(N)
    sweeps = make_sweeps(vel)
    obs = wp.array(sweeps[0], dtype=float)

    # broad prior guess: one wide blob in the middle of the domain
    source = wp.array(blobs(N, [(0.5, 0.5)], 0.25, [0.4]), dtype=float, requires_grad=True)
    log_kappa = wp.array([np.log(1.5e-3)], dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    u, mid = allocate(N, STEPS, requires_grad=True)

    opt = warp.optim.Adam([source.flatten(), log_kappa], lr=0.05)
    tape = wp.Tape()

    for it in range(iterations):
        tape.reset()
        loss.zero_()
        with tape:
            objective(u, mid, vel, source, log_kappa, obs, loss)
        tape.backward(loss)

        # stage the next sensor sweep for the following iteration
        obs.assign(sweeps[(it + 1) % len(sweeps)])

        print("loss %d %.9g" % (it, loss.numpy()[0]))
        if it == 0:
            g = source.grad.numpy()
            print("grad source", fmt(g[8:14, 10]))
            print("grad log_kappa", fmt(log_kappa.grad.numpy()))

        opt.step([source.grad.flatten(), log_kappa.grad])

    return source, log_kappa


if __name__ == "__main__":
    wp.set_device("cpu")
    main()
