"""2-D scalar wave equation on a square membrane (leapfrog, 5-point stencil, sponge layer),
recorded in segments; sensors measure the RMS displacement in each segment."""
import numpy as np
import warp as wp

N = 32
PATCH = 12  # the initial displacement lives in the lower-left PATCH x PATCH cells
COARSE = 6
AMAX = 1.2  # the membrane cannot be pulled further than this


@wp.func
def laplacian(u: wp.array2d(dtype=float), i: int, j: int):
    n = u.shape[0]
    c = u[i, j]
    up = wp.where(i + 1 < n, u[wp.min(i + 1, n - 1), j], c)
    dn = wp.where(i > 0, u[wp.max(i - 1, 0), j], c)
    rt = wp.where(j + 1 < n, u[i, wp.min(j + 1, n - 1)], c)
    lf = wp.where(j > 0, u[i, wp.max(j - 1, 0)], c)
    return up + dn + rt + lf - 4.0 * c


@wp.func
def bilinear(coarse: wp.array2d(dtype=float), x: float, y: float):
    m = coarse.shape[0] - 1
    fx = wp.clamp(x * float(m), 0.0, float(m) - 1.0e-4)
    fy = wp.clamp(y * float(m), 0.0, float(m) - 1.0e-4)
    i0 = int(fx)
    j0 = int(fy)
    tx = fx - float(i0)
    ty = fy - float(j0)
    a = (1.0 - tx) * coarse[i0, j0] + tx * coarse[i0 + 1, j0]
    b = (1.0 - tx) * coarse[i0, j0 + 1] + tx * coarse[i0 + 1, j0 + 1]
    return (1.0 - ty) * a + ty * b


@wp.kernel
def lift_initial(coarse: wp.array2d(dtype=float), patch: int, u0: wp.array2d(dtype=float)):
    i, j = wp.tid()
    val = float(0.0)
    if i < patch and j < patch:
        x = float(i) / float(patch - 1)
        y = float(j) / float(patch - 1)
        window = wp.sin(3.14159265 * x) * wp.sin(3.14159265 * y)
        val = window * bilinear(coarse, x, y)
    u0[i, j] = val


@wp.kernel
def soft_clip(u_in: wp.array2d(dtype=float), amax: float, u_out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    u_out[i, j] = amax * wp.tanh(u_in[i, j] / amax)


@wp.kernel
def leapfrog(u_prev: wp.array2d(dtype=float), u: wp.array2d(dtype=float), sponge: wp.array2d(dtype=float),
             c2: float, u_next: wp.array2d(dtype=float)):
    i, j = wp.tid()
    un = 2.0 * u[i, j] - u_prev[i, j] + c2 * laplacian(u, i, j)
    u_next[i, j] = un * sponge[i, j]


@wp.kernel
def accumulate_energy(u: wp.array2d(dtype=float), sensors: wp.array(dtype=wp.vec2i), energy: wp.array(dtype=float)):
    s = wp.tid()
    p = sensors[s]
    val = u[p[0], p[1]]
    wp.atomic_add(energy, s, val * val)


@wp.kernel
def sensor_misfit(energy: wp.array(dtype=float), target: wp.array2d(dtype=float), seg: int, n_steps: int,
                  loss: wp.array(dtype=float)):
    s = wp.tid()
    e = energy[s] / float(n_steps)
    rms = float(0.0)
    if e > 0.0:
        rms = wp.sqrt(e)
    d = rms - target[seg, s]
    wp.atomic_add(loss, 0, d * d)


def make_sponge(n, width=5, strength=0.08):
    s = np.ones((n, n), dtype=np.float32)
    for k in range(width):
        f = 1.0 - strength * (width - k) / width
        s[k, :] *= f
        s[n - 1 - k, :] *= f
        s[:, k] *= f
        s[:, n - 1 - k] *= f
    return s


class WaveSim:
    def __init__(self, sensors, segments=4, steps_per_segment=10, c2=0.2):
        self.segments = segments
        self.steps_per_segment = steps_per_segment
        self.c2 = c2
        self.sensors = wp.array(np.array(sensors, dtype=np.int32), dtype=wp.vec2i)
        self.n_sensors = len(sensors)
        self.sponge = wp.array(make_sponge(N), dtype=float)
        total = segments * steps_per_segment
        # u[0] = u[1] = initial displacement (membrane released at rest)
        self.u = [wp.zeros((N, N), dtype=float, requires_grad=True) for _ in range(total + 2)]
        self.raw = wp.zeros((N, N), dtype=float, requires_grad=True)
        self.energy = [wp.zeros(self.n_sensors, dtype=float, requires_grad=True) for _ in range(segments)]
        self.losses = [wp.zeros(1, dtype=float, requires_grad=True) for _ in range(segments)]

    def start(self, coarse):
        wp.launch(lift_initial, dim=(N, N), inputs=[coarse, PATCH], outputs=[self.raw])
        wp.launch(soft_clip, dim=(N, N), inputs=[self.raw, AMAX], outputs=[self.u[0]])
        wp.copy(self.u[1], self.u[0])

    def run_segment(self, k):
        for s in range(self.steps_per_segment):
            t = k * self.steps_per_segment + s + 1
            wp.launch(leapfrog, dim=(N, N), inputs=[self.u[t - 1], self.u[t], self.sponge, self.c2],
                      outputs=[self.u[t + 1]])
            wp.launch(accumulate_energy, dim=self.n_sensors, inputs=[self.u[t + 1], self.sensors],
                      outputs=[self.energy[k]])

    def energy_of(self, k):
        return self.energy[k]

    def segment_loss(self, k, target):
        wp.launch(sensor_misfit, dim=self.n_sensors,
                  inputs=[self.energy[k], target, k, self.steps_per_segment], outputs=[self.losses[k]])
        return self.losses[k]

    def clear(self):
        for e in self.energy:
            e.zero_()
        for l in self.losses:
            l.zero_()
