"""A small pinned mass-spring net with a floor, stepped with semi-implicit Euler."""

import numpy as np
import warp as wp


@wp.struct
class Material:
    ke: float
    kd: float
    gravity: wp.vec3
    floor_y: float


@wp.kernel
def eval_springs(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    springs: wp.array2d(dtype=int),
    rest: wp.array(dtype=float),
    mat: Material,
    f: wp.array(dtype=wp.vec3),
):
    s = wp.tid()
    a = springs[s, 0]
    b = springs[s, 1]
    d = x[b] - x[a]
    l = wp.length(d)
    n = d / l
    rel = wp.dot(v[b] - v[a], n)
    fs = (mat.ke * (l - rest[s]) + mat.kd * rel) * n
    wp.atomic_add(f, a, fs)
    wp.atomic_sub(f, b, fs)


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    u: wp.array(dtype=wp.vec3),
    inv_mass: wp.array(dtype=float),
    mat: Material,
    dt: float,
    x_pred: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    w = inv_mass[i]
    g = mat.gravity
    if w == 0.0:
        g = wp.vec3(0.0)
    v_new = v[i] + dt * (w * (f[i] + u[i]) + g)
    v_out[i] = v_new
    x_pred[i] = x[i] + dt * v_new


@wp.kernel
def floor_project(x_pred: wp.array(dtype=wp.vec3), mat: Material, x_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = x_pred[i]
    if p[1] < mat.floor_y:
        p = wp.vec3(p[0], mat.floor_y, p[2])
    x_out[i] = p


class Net:
    def __init__(self, rows=4, cols=4, spacing=0.1, steps=30, dt=0.01):
        self.rows, self.cols, self.steps, self.dt = rows, cols, steps, dt
        self.n = rows * cols
        pos = np.array([[c * spacing, -r * spacing, 0.0] for r in range(rows) for c in range(cols)], dtype=np.float32)
        springs = []
        for r in range(rows):
            for c in range(cols):
                i = r * cols + c
                if c + 1 < cols:
                    springs.append((i, i + 1))
                if r + 1 < rows:
                    springs.append((i, i + cols))
                if r + 1 < rows and c + 1 < cols:
                    springs.append((i, i + cols + 1))
        springs = np.array(springs, dtype=np.int32)
        rest = np.linalg.norm(pos[springs[:, 1]] - pos[springs[:, 0]], axis=1).astype(np.float32)
        inv_mass = np.full(self.n, 10.0, dtype=np.float32)
        inv_mass[:cols] = 0.0  # pinned top row

        self.springs = wp.array(springs, dtype=int)
        self.rest = wp.array(rest, dtype=float)
        self.inv_mass = wp.array(inv_mass, dtype=float)
        self.n_springs = len(springs)

        self.mat = Material()
        self.mat.ke = 60.0
        self.mat.kd = 0.2
        self.mat.gravity = wp.vec3(0.0, -9.8, 0.0)
        self.mat.floor_y = -0.32

        self.x0 = wp.array(pos, dtype=wp.vec3)
        self.xs = [wp.zeros(self.n, dtype=wp.vec3, requires_grad=True) for _ in range(steps + 1)]
        self.vs = [wp.zeros(self.n, dtype=wp.vec3, requires_grad=True) for _ in range(steps + 1)]
        self.xp = [wp.zeros(self.n, dtype=wp.vec3, requires_grad=True) for _ in range(steps)]
        self.f = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)

    def reset(self):
        wp.copy(self.xs[0], self.x0)
        self.vs[0].zero_()

    def rollout(self, u):
        for t in range(self.steps):
            self.f.zero_()
            wp.launch(eval_springs, dim=self.n_springs,
                      inputs=[self.xs[t], self.vs[t], self.springs, self.rest, self.mat], outputs=[self.f])
            wp.launch(integrate, dim=self.n,
                      inputs=[self.xs[t], self.vs[t], self.f, u, self.inv_mass, self.mat, self.dt],
                      outputs=[self.xp[t], self.vs[t + 1]])
            wp.launch(floor_project, dim=self.n, inputs=[self.xp[t], self.mat], outputs=[self.xs[t + 1]])
        return self.xs[self.steps]
