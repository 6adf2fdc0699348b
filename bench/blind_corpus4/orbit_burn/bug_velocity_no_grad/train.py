"""Train a momentum-free thrust schedule that moves a ring of satellites to new orbit radii (checked at the end
of each of three windows), with a fuel penalty. Plain host-side gradient descent.
"""

import functools

import numpy as np
import warp as wp

import orbits

wp.config.quiet = True

PROBES = [0, 37, 150, 359]


def objective(model, bufs, thrust, tape):
    xs, vs, centered, loss = bufs
    with tape:
        orbits.center_thrust(tape, model, thrust, centered)
        orbits.start(model, bufs)
        for w in range(model.windows):
            t_end = orbits.run_window(model, bufs, w)
            wp.launch(orbits.radius_cost, dim=model.n, inputs=[xs[t_end], model.r_target, 1.0 + w], outputs=[loss])
        wp.launch(orbits.fuel_cost, dim=centered.shape[0], inputs=[centered, 0.002], outputs=[loss])
    return loss


def report(it, loss, thrust, names):
    print(f"loss {it} {loss.numpy()[0]:.9g}")
    if it == 0:
        g = thrust.grad.numpy()
        print(f"grad {names[0]} [{' '.join('%.9g' % c for k in PROBES for c in g[k])}]")


def train(model, bufs, thrust, iters, lr, on_iter):
    loss = bufs[3]
    for it in range(iters):
        tape = wp.Tape()
        loss.zero_()
        objective(model, bufs, thrust, tape)
        tape.backward(loss)
        on_iter(it, loss, thrust)
        thrust.assign(thrust.numpy() - lr * thrust.grad.numpy())
        tape.zero()


def main():
    with wp.ScopedDevice("cpu"):
        model = orbits.make_model()
        bufs = orbits.allocate(model)
        rng = np.random.default_rng(5)
        thrust = wp.array(rng.normal(scale=0.05, size=(model.steps * model.n, 2)).astype(np.float32),
                          dtype=wp.vec2, requires_grad=True)
        train(model, bufs, thrust, iters=5, lr=0.5, on_iter=functools.partial(report, names=("thrust",)))


if __name__ == "__main__":
    main()
