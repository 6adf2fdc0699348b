"""Identify the spring stiffnesses of a hammock (5x5 mass-spring net, corners pinned)
from the shape it sags into after 0.4 s under gravity.

State is kept in @wp.struct objects holding arrays; one Particles struct per time step.
"""
import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True
wp.set_device("cpu")

GRID = 5
SPACING = 0.25
STEPS = 80
DT = 0.005
DRAG = 1.5
GRAVITY = wp.vec3(0.0, 0.0, -9.81)


@wp.struct
class Particles:
    x: wp.array(dtype=wp.vec3)
    v: wp.array(dtype=wp.vec3)
    f: wp.array(dtype=wp.vec3)
    inv_mass: wp.array(dtype=float)


@wp.struct
class Springs:
    a: wp.array(dtype=int)
    b: wp.array(dtype=int)
    rest: wp.array(dtype=float)
    ke: wp.array(dtype=float)
    kd: float


@wp.kernel
def stiffness_from_log(log_ke: wp.array(dtype=float), springs: Springs):
    s = wp.tid()
    springs.ke[s] = wp.exp(log_ke[s])


@wp.kernel
def spring_forces(p: Particles, springs: Springs):
    s = wp.tid()
    i = springs.a[s]
    j = springs.b[s]
    d = p.x[j] - p.x[i]
    length = wp.length(d)
    n = d / length
    rel_v = wp.dot(p.v[j] - p.v[i], n)
    fs = (springs.ke[s] * (length - springs.rest[s]) + springs.kd * rel_v) * n
    wp.atomic_add(p.f, i, fs)
    wp.atomic_sub(p.f, j, fs)


@wp.kernel
def integrate(p: Particles, dt: float, nxt: Particles):
    i = wp.tid()
    w = p.inv_mass[i]
    v = p.v[i]
    if w > 0.0:
        v = v + dt * (p.f[i] * w + GRAVITY)
        v = v / (1.0 + dt * DRAG * wp.length(v))
    nxt.v[i] = v
    nxt.x[i] = p.x[i] + dt * v


@wp.kernel
def shape_error(p: Particles, target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = p.x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def make_particles(x0, inv_mass):
    p = Particles()
    p.x = wp.array(x0, dtype=wp.vec3, requires_grad=True)
    p.v = wp.zeros(len(x0), dtype=wp.vec3, requires_grad=True)
    p.f = wp.zeros(len(x0), dtype=wp.vec3, requires_grad=True)
    p.inv_mass = inv_mass
    return p


def build_net():
    x0 = np.array([[i * SPACING, j * SPACING, 0.0] for j in range(GRID) for i in range(GRID)], dtype=np.float32)
    inv = np.full(GRID * GRID, 10.0, dtype=np.float32)
    for c in (0, GRID - 1, GRID * (GRID - 1), GRID * GRID - 1):
        inv[c] = 0.0
    pairs = []
    for j in range(GRID):
        for i in range(GRID):
            k = j * GRID + i
            if i + 1 < GRID:
                pairs.append((k, k + 1))
            if j + 1 < GRID:
                pairs.append((k, k + GRID))
            if i + 1 < GRID and j + 1 < GRID:
                pairs.append((k, k + GRID + 1))
                pairs.append((k + 1, k + GRID))
    pairs = np.array(pairs, dtype=np.int32)
    rest = np.linalg.norm(x0[pairs[:, 1]] - x0[pairs[:, 0]], axis=1).astype(np.float32)
    springs = Springs()
    springs.a = wp.array(pairs[:, 0], dtype=int)
    springs.b = wp.array(pairs[:, 1], dtype=int)
    springs.rest = wp.array(rest, dtype=float)
    springs.ke = wp.zeros(len(pairs), dtype=float, requires_grad=True)
    springs.kd = 0.5
    return x0, wp.array(inv, dtype=float), springs


def simulate(states, springs, log_ke):
    wp.launch(stiffness_from_log, dim=springs.ke.shape[0], inputs=[log_ke, springs])
    for t in range(STEPS):
        cur, nxt = states[t % 2], states[(t + 1) % 2]
        cur.f.zero_()
        wp.launch(spring_forces, dim=springs.ke.shape[0], inputs=[cur, springs])
        wp.launch(integrate, dim=cur.x.shape[0], inputs=[cur, DT], outputs=[nxt])


def main():
    x0, inv_mass, springs = build_net()
    n_springs = springs.ke.shape[0]
    states = [make_particles(x0, inv_mass) for _ in range(2)]

    # "observed" shape: a net with a soft band along the middle row
    ke_true = np.full(n_springs, np.log(60.0), dtype=np.float32)
    ke_true[::3] = np.log(25.0)
    simulate(states, springs, wp.array(ke_true, dtype=float))
    target = wp.clone(states[STEPS % 2].x)

    log_ke = wp.array(np.full(n_springs, np.log(40.0), dtype=np.float32), requires_grad=True)
    opt = warp.optim.Adam([log_ke], lr=0.05)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    shown = [0, 1, 2, 3, 17, 33, 50, n_springs - 1]

    for it in range(5):
        # fresh episode: rest pose, no motion, cleared force accumulators
        states[0].x.assign(x0)
        states[0].v.zero_()
        for s in states:
            s.f.zero_()
        loss.zero_()
        tape = wp.Tape()
        with tape:
            simulate(states, springs, log_ke)
            wp.launch(shape_error, dim=GRID * GRID, inputs=[states[STEPS % 2], target], outputs=[loss])
        tape.backward(loss)
        print("loss %d %.9g" % (it, loss.numpy()[0]))
        g = tape.gradients[log_ke]
        if it == 0:
            gn = g.numpy()
            print("grad log_ke [%s]" % " ".join("%.9g" % gn[k] for k in shown))
        opt.step([g])
        tape.zero()


if __name__ == "__main__":
    main()
