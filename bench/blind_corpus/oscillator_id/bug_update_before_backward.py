"""System identification of damped oscillators that hit an end stop (Hertz
contact). Spring stiffness and damping are recovered from an observed
trajectory; the tape lives inside a context manager that also does SGD."""

import contextlib

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.set_device("cpu")

M = 6
STEPS = 50
DT = 0.02
WALL = 0.7
K_CONTACT = 400.0


@wp.func
def stop_force(x: float):
    # Hertzian end stop: f = kc * p^1.5 while the mass penetrates the wall
    p = x - WALL
    f = float(0.0)
    if p > 0.0:
        f = -K_CONTACT * p * wp.sqrt(p)
    return f


@wp.kernel
def step_oscillators(
    x_in: wp.array(dtype=float),
    v_in: wp.array(dtype=float),
    k: wp.array(dtype=float),
    c: wp.array(dtype=float),
    dt: float,
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    x = x_in[i]
    v = v_in[i]
    a = -k[i] * x - c[i] * v + stop_force(x)
    v_new = v + dt * a
    v_out[i] = v_new
    x_out[i] = x + dt * v_new


@wp.kernel
def residual(x: wp.array(dtype=float), obs: wp.array(dtype=float), r: wp.array(dtype=float)):
    i = wp.tid()
    r[i] = x[i] - obs[i]


@wp.kernel
def accumulate_sq(r: wp.array(dtype=float), scale: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, scale * r[i] * r[i])


@wp.kernel
def sgd_clip(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float, clip: float):
    i = wp.tid()
    p[i] = p[i] - lr * wp.clamp(g[i], -clip, clip)


@contextlib.contextmanager
def sgd_step(loss, params, lr, log, clip=50.0):
    """Record the body on a tape, then backpropagate `loss` and update `params`."""
    tape = wp.Tape()
    with tape:
        yield tape
    for p in params.values():
        wp.launch(sgd_clip, dim=p.shape[0], inputs=[p, p.grad, lr, clip])
    tape.backward(loss)
    for name, p in params.items():
        log[name] = p.grad.numpy().copy()
    tape.zero()


def rollout(k, c, xs, vs, res=None, obs=None, loss=None):
    for t in range(STEPS):
        wp.launch(step_oscillators, dim=M, inputs=[xs[t], vs[t], k, c, DT], outputs=[xs[t + 1], vs[t + 1]])
        if loss is not None:
            wp.launch(residual, dim=M, inputs=[xs[t + 1], obs[t + 1]], outputs=[res[t]])
            wp.launch(accumulate_sq, dim=M, inputs=[res[t], 1.0 / STEPS], outputs=[loss])


def alloc(n, rg=True):
    return [wp.zeros(M, dtype=float, requires_grad=rg) for _ in range(n)]


if __name__ == "__main__":
    x0 = np.linspace(0.5, 1.0, M).astype(np.float32)

    # synthetic measurements from the "true" parameters
    k_true = wp.array(np.linspace(6.0, 12.0, M).astype(np.float32), dtype=float)
    c_true = wp.array(np.full(M, 0.4, dtype=np.float32), dtype=float)
    obs, obs_v = alloc(STEPS + 1, rg=False), alloc(STEPS + 1, rg=False)
    obs[0].assign(x0)
    rollout(k_true, c_true, obs, obs_v)

    k = wp.array(np.full(M, 8.0, dtype=np.float32), dtype=float, requires_grad=True)
    c = wp.array(np.full(M, 0.2, dtype=np.float32), dtype=float, requires_grad=True)
    params = {"k": k, "c": c}
    xs, vs, res = alloc(STEPS + 1), alloc(STEPS + 1), alloc(STEPS)
    xs[0].assign(x0)
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    for it in range(4):
        loss.zero_()
        log = {}
        with sgd_step(loss, params, lr=4.0, log=log):
            rollout(k, c, xs, vs, res, obs, loss)
        print(f"loss {it} {loss.numpy()[0]:.9g}")
        if it == 0:
            for name, g in log.items():
                print("grad", name, np.array2string(g.ravel()[:8], precision=9))
