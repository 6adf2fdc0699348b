# Drop 16 small gliders from a hovering drone (released at rest) and tune each one's
# drag and lift coefficients so that it passes its checkpoints and lands on its pad.
# Functional style: loss_fn(params) records a fresh tape through a context-manager
# helper and seeds the backward with an explicit 1/N array (mean over gliders).
import contextlib

import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True
wp.init()

N = 16
STEPS = 60
WINDOWS = 4
DT = 0.02
GRAVITY = wp.vec2(0.0, -9.81)
X0 = wp.vec2(0.0, 10.0)


@wp.kernel
def glide_step(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    log_cd: wp.array(dtype=float),
    cl: wp.array(dtype=float),
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    vi = v[i]
    speed = wp.length(vi)
    heading = wp.vec2(0.0, 0.0)
    if speed > 0.0:
        heading = vi / speed
    q = speed * speed
    drag = -wp.exp(log_cd[i]) * q * heading
    lift = cl[i] * q * wp.vec2(-heading[1], heading[0])
    a = GRAVITY + drag + lift
    v_new = vi + dt * a
    v_out[i] = v_new
    x_out[i] = x[i] + dt * v_new


@wp.kernel
def checkpoint_cost(x: wp.array(dtype=wp.vec2), pads: wp.array(dtype=wp.vec2), frac: float, weight: float,
                    err: wp.array(dtype=float)):
    i = wp.tid()
    goal = X0 + frac * (pads[i] - X0)
    d = x[i] - goal
    wp.atomic_add(err, i, weight * wp.dot(d, d))


@contextlib.contextmanager
def recording():
    tape = wp.Tape()
    with tape:
        yield tape


def make_loss_fn(pads):
    xs = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)]
    vs = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)]
    xs[0].fill_(X0)
    err = wp.zeros(N, dtype=float, requires_grad=True)
    seed = wp.full(N, 1.0 / N, dtype=float)
    per_window = STEPS // WINDOWS

    def simulate_window(w, log_cd, cl):
        for s in range(w * per_window, (w + 1) * per_window):
            wp.launch(glide_step, dim=N, inputs=[xs[s], vs[s], log_cd, cl, DT], outputs=[xs[s + 1], vs[s + 1]])
        frac = float(w + 1) / WINDOWS
        wp.launch(checkpoint_cost, dim=N, inputs=[xs[(w + 1) * per_window], pads, frac, 0.25 + 0.75 * (w == WINDOWS - 1)],
                  outputs=[err])

    def loss_fn(params):
        log_cd, cl = params
        err.zero_()
        with recording() as tape:
            for w in range(WINDOWS):
                simulate_window(w, log_cd, cl)
        tape.backward(grads={err: seed})
        return float(np.mean(err.numpy())), tape

    return loss_fn


def main():
    rng = np.random.default_rng(7)
    pads_np = np.stack([rng.uniform(0.5, 3.0, N), rng.uniform(2.5, 5.0, N)], axis=1).astype(np.float32)
    pads = wp.array(pads_np, dtype=wp.vec2)

    log_cd = wp.array(np.full(N, np.log(0.3), dtype=np.float32), requires_grad=True)
    cl = wp.array(np.full(N, 0.1, dtype=np.float32), requires_grad=True)
    params = [log_cd, cl]
    opt = warp.optim.SGD(params, lr=0.1, momentum=0.5)

    loss_fn = make_loss_fn(pads)
    for it in range(5):
        value, tape = loss_fn(params)
        print("loss %d %.9g" % (it, value))
        if it == 0:
            for name, p in zip(("log_cd", "cl"), params):
                print("grad %s [%s]" % (name, " ".join("%.9g" % g for g in p.grad.numpy())))
        opt.step([p.grad for p in params])
        tape.zero()


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        main()
