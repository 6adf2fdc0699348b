"""Pachinko: choose the release points of balls dropped from rest through a field of round pegs so each lands
near its own bin. Ball-peg penalty contacts are a 2-D launch over (ball, peg); buffers sit in a SimpleNamespace
and the optimisation loop is a generator that the caller drives.
"""

from types import SimpleNamespace

import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True

DT = 0.01
STEPS = 90
RADIUS = 0.12
KC = 2000.0
DRAG = 0.4
FLOOR_DAMP = 8.0


@wp.kernel
def peg_contacts(
    x: wp.array(dtype=wp.vec2),
    pegs: wp.array(dtype=wp.vec2),
    f: wp.array(dtype=wp.vec2),
):
    i, j = wp.tid()
    d = x[i] - pegs[j]
    dist = wp.length(d)
    pen = RADIUS - dist
    if pen > 0.0:
        wp.atomic_add(f, i, (KC * pen * pen / dist) * d)


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    f: wp.array(dtype=wp.vec2),
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    vi = v[i]
    a = f[i] + wp.vec2(0.0, -9.81) - DRAG * wp.length(vi) * vi
    v_new = vi + a * dt
    v_out[i] = v_new
    x_out[i] = x[i] + v_new * dt


@wp.kernel
def floor_damping(x: wp.array(dtype=wp.vec2), v: wp.array(dtype=wp.vec2), v_out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    depth = wp.max(0.3 - x[i][1], 0.0)
    v_out[i] = v[i] / (1.0 + FLOOR_DAMP * depth * wp.length(v[i]))


@wp.kernel
def release(x_rel: wp.array(dtype=float), height: float, x0: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    x0[i] = wp.vec2(x_rel[i], height)


@wp.kernel
def bin_cost(x: wp.array(dtype=wp.vec2), bins: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    e = x[i][0] - bins[i]
    wp.atomic_add(loss, 0, e * e)


def make_pegs():
    pegs = []
    for row in range(4):
        for col in range(5):
            pegs.append((-1.0 + 0.5 * col + 0.25 * (row % 2), 1.6 - 0.35 * row))
    return wp.array(np.array(pegs, dtype=np.float32), dtype=wp.vec2)


def allocate(n):
    return SimpleNamespace(
        x=[wp.zeros(n, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)],
        v=[wp.zeros(n, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)],
        vf=[wp.zeros(n, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS)],
        f=wp.zeros(n, dtype=wp.vec2, requires_grad=True),
        loss=wp.zeros(1, dtype=float, requires_grad=True),
    )


def rollout(bufs, pegs, x_rel, bins):
    n = x_rel.shape[0]
    wp.launch(release, dim=n, inputs=[x_rel, 2.0], outputs=[bufs.x[0]])
    for t in range(STEPS):
        bufs.f.zero_()
        wp.launch(peg_contacts, dim=(n, pegs.shape[0]), inputs=[bufs.x[t], pegs], outputs=[bufs.f])
        wp.launch(integrate, dim=n, inputs=[bufs.x[t], bufs.v[t], bufs.f, DT], outputs=[bufs.x[t + 1], bufs.vf[t]])
        wp.launch(floor_damping, dim=n, inputs=[bufs.x[t + 1], bufs.vf[t]], outputs=[bufs.v[t + 1]])
    wp.launch(bin_cost, dim=n, inputs=[bufs.x[STEPS], bins], outputs=[bufs.loss])


def optimize(bufs, pegs, x_rel, bins, opt, iters):
    """Yields (iteration, loss) after each backward; the caller applies the update before resuming."""
    for it in range(iters):
        bufs.loss.zero_()
        tape = wp.Tape()
        with tape:
            rollout(bufs, pegs, x_rel, bins)
        tape.backward(bufs.loss)
        yield it, float(bufs.loss.numpy()[0])
        tape.zero()


def main():
    with wp.ScopedDevice("cpu"):
        n = 8
        pegs = make_pegs()
        x_rel = wp.array(np.linspace(-0.85, 0.9, n).astype(np.float32), dtype=float, requires_grad=True)
        bins = wp.array(np.linspace(-1.0, 1.0, n)[::-1].astype(np.float32), dtype=float)
        bufs = allocate(n)
        opt = warp.optim.Adam([x_rel], lr=0.05)
        for it, value in optimize(bufs, pegs, x_rel, bins, opt, iters=5):
            print(f"loss {it} {value:.9g}")
            if it == 0:
                print(f"grad x_rel [{' '.join('%.9g' % g for g in x_rel.grad.numpy())}]")
            opt.step([x_rel.grad])


if __name__ == "__main__":
    main()
