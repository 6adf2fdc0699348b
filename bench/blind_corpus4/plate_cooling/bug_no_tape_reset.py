"""Recover a conductivity map of a cooling plate from snapshots taken at the end of each of three windows.

The whole temperature history lives in one wp.array3d (step, i, j); kernels are 2-D launches. The misfit uses a
Charbonnier penalty whose adjoint is supplied by hand with @wp.func_grad.
"""

from dataclasses import dataclass

import numpy as np
import warp as wp

wp.config.quiet = True


@dataclass
class Config:
    nx: int = 20
    ny: int = 20
    steps_per_window: int = 10
    windows: int = 3
    dt: float = 0.2
    cooling: float = 0.8
    eps: float = 1e-6
    lr: float = 1.0
    iters: int = 5


@wp.func
def charbonnier(r: float, eps: float):
    return wp.sqrt(r * r + eps)


@wp.func_grad(charbonnier)
def adj_charbonnier(r: float, eps: float, adj_ret: float):
    wp.adjoint[r] += adj_ret * r / wp.sqrt(r * r + eps)


@wp.func
def face(k: wp.array2d(dtype=float), i: int, j: int, ii: int, jj: int):
    # harmonic mean of the two cell conductivities
    a = k[i, j]
    b = k[ii, jj]
    return 2.0 * a * b / (a + b)


@wp.kernel
def exp_field(log_k: wp.array2d(dtype=float), k: wp.array2d(dtype=float)):
    i, j = wp.tid()
    k[i, j] = wp.exp(log_k[i, j])


@wp.kernel
def diffuse(
    u: wp.array3d(dtype=float),
    s_in: int,
    k: wp.array2d(dtype=float),
    dt: float,
    mid: wp.array3d(dtype=float),
    s_mid: int,
):
    i, j = wp.tid()
    nx = u.shape[1]
    ny = u.shape[2]
    uc = u[s_in, i, j]
    flux = float(0.0)
    if i > 0:
        flux += face(k, i, j, i - 1, j) * (u[s_in, i - 1, j] - uc)
    if i < nx - 1:
        flux += face(k, i, j, i + 1, j) * (u[s_in, i + 1, j] - uc)
    if j > 0:
        flux += face(k, i, j, i, j - 1) * (u[s_in, i, j - 1] - uc)
    if j < ny - 1:
        flux += face(k, i, j, i, j + 1) * (u[s_in, i, j + 1] - uc)
    mid[s_mid, i, j] = uc + dt * flux


@wp.kernel
def cool(mid: wp.array3d(dtype=float), s_mid: int, rate: float, dt: float, u: wp.array3d(dtype=float), s_out: int):
    i, j = wp.tid()
    m = mid[s_mid, i, j]
    u[s_out, i, j] = m / (1.0 + dt * rate * m * m)


@wp.kernel
def snapshot_misfit(
    u: wp.array3d(dtype=float),
    s: int,
    target: wp.array3d(dtype=float),
    w: int,
    eps: float,
    loss: wp.array(dtype=float),
):
    i, j = wp.tid()
    wp.atomic_add(loss, 0, charbonnier(u[s, i, j] - target[w, i, j], eps))


@wp.kernel
def descend(p: wp.array2d(dtype=float), g: wp.array2d(dtype=float), lr: float):
    i, j = wp.tid()
    p[i, j] = p[i, j] - lr * g[i, j]


def initial_field(cfg):
    x, y = np.meshgrid(np.linspace(-1, 1, cfg.nx), np.linspace(-1, 1, cfg.ny), indexing="ij")
    return (1.5 * np.exp(-((x + 0.2) ** 2 + (y - 0.1) ** 2) / 0.15)).astype(np.float32)


class PlateInversion:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        n_steps = cfg.steps_per_window * cfg.windows
        shape2 = (cfg.nx, cfg.ny)
        self.u = wp.zeros((n_steps + 1, cfg.nx, cfg.ny), dtype=float, requires_grad=True)
        self.mid = wp.zeros((n_steps, cfg.nx, cfg.ny), dtype=float, requires_grad=True)
        self.u0 = wp.array(initial_field(cfg), dtype=float)
        self.log_k = wp.array(np.full(shape2, np.log(0.3), dtype=np.float32), dtype=float, requires_grad=True)
        self.k = wp.zeros(shape2, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.target = wp.zeros((cfg.windows, cfg.nx, cfg.ny), dtype=float)
        self.tape = wp.Tape()
        self.make_target()

    def make_target(self):
        cfg = self.cfg
        x, y = np.meshgrid(np.linspace(-1, 1, cfg.nx), np.linspace(-1, 1, cfg.ny), indexing="ij")
        true_log_k = np.log(0.3) + 0.8 * np.exp(-((x - 0.3) ** 2 + y**2) / 0.2) - 0.5 * (y < -0.4)
        wp.copy(self.log_k, wp.array(true_log_k.astype(np.float32), dtype=float))
        self.start()
        for w in range(cfg.windows):
            t_end = self.run_window(w)
            wp.copy(self.target[w], self.u[t_end])
        self.log_k.fill_(float(np.log(0.3)))

    def start(self):
        wp.copy(self.u[0], self.u0)
        wp.launch(exp_field, dim=self.k.shape, inputs=[self.log_k], outputs=[self.k])

    def run_window(self, w):
        cfg = self.cfg
        shape2 = (cfg.nx, cfg.ny)
        t0 = w * cfg.steps_per_window
        for t in range(t0, t0 + cfg.steps_per_window):
            wp.launch(diffuse, dim=shape2, inputs=[self.u, t, self.k, cfg.dt], outputs=[self.mid, t])
            wp.launch(cool, dim=shape2, inputs=[self.mid, t, cfg.cooling, cfg.dt], outputs=[self.u, t + 1])
        return t0 + cfg.steps_per_window

    def window_loss(self, w, t_end):
        cfg = self.cfg
        wp.launch(
            snapshot_misfit,
            dim=(cfg.nx, cfg.ny),
            inputs=[self.u, t_end, self.target, w, cfg.eps],
            outputs=[self.loss],
        )

    def forward(self):
        self.loss.zero_()
        with self.tape:
            self.start()
            for w in range(self.cfg.windows):
                t_end = self.run_window(w)
                self.window_loss(w, t_end)
        self.tape.backward(self.loss)

    def update(self):
        wp.launch(descend, dim=self.log_k.shape, inputs=[self.log_k, self.log_k.grad, self.cfg.lr])


PROBES = [(3, 4), (5, 10), (8, 8), (10, 2), (12, 12), (14, 6), (16, 15), (18, 9)]


def main():
    cfg = Config()
    with wp.ScopedDevice("cpu"):
        inv = PlateInversion(cfg)
        for it in range(cfg.iters):
            inv.forward()
            print(f"loss {it} {inv.loss.numpy()[0]:.9g}")
            if it == 0:
                g = inv.log_k.grad.numpy()
                print(f"grad log_k [{' '.join('%.9g' % g[p] for p in PROBES)}]")
            inv.update()


if __name__ == "__main__":
    main()
