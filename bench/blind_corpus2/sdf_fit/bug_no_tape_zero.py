"""Fit a rotated rounded box blended with a sphere to a target truncated SDF.

The model is smin(box(R^T (p - c_box)), sphere(p - c_sph)) with a polynomial smooth
minimum; the rotation is a rotation vector turned into a quaternion. Each iteration
draws a fresh minibatch of sample points, evaluates the truncated SDF of the target
shape on them and takes one Adam step on the shape parameters.

    python ok.py
"""

import numpy as np
import warp as wp
import warp.optim

TRUNC = 0.25
BLEND = 0.15
ROUNDING = 0.05


@wp.func
def quat_from_rotvec(r: wp.vec3):
    angle = wp.length(r)
    if angle > 1.0e-6:
        return wp.quat_from_axis_angle(r / angle, angle)
    # small-angle form, exact to first order
    return wp.normalize(wp.quat(0.5 * r[0], 0.5 * r[1], 0.5 * r[2], 1.0))


@wp.func
def sd_round_box(p: wp.vec3, half: wp.vec3, rounding: float):
    q = wp.vec3(wp.abs(p[0]), wp.abs(p[1]), wp.abs(p[2])) - half
    outside = wp.length(wp.vec3(wp.max(q[0], 0.0), wp.max(q[1], 0.0), wp.max(q[2], 0.0)))
    inside = wp.min(wp.max(q[0], wp.max(q[1], q[2])), 0.0)
    return outside + inside - rounding


@wp.func
def smooth_min(a: float, b: float, k: float):
    h = wp.clamp(0.5 + 0.5 * (b - a) / k, 0.0, 1.0)
    return b * (1.0 - h) + a * h - k * h * (1.0 - h)


@wp.kernel
def to_box_frame(
    points: wp.array(dtype=wp.vec3),
    center: wp.array(dtype=wp.vec3),
    rotvec: wp.array(dtype=wp.vec3),
    local: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    q = quat_from_rotvec(rotvec[0])
    local[i] = wp.quat_rotate_inv(q, points[i] - center[0])


@wp.kernel
def shape_sdf(
    points: wp.array(dtype=wp.vec3),
    local: wp.array(dtype=wp.vec3),
    half: wp.array(dtype=wp.vec3),
    sphere_center: wp.array(dtype=wp.vec3),
    sphere_radius: wp.array(dtype=float),
    sdf: wp.array(dtype=float),
):
    i = wp.tid()
    d_box = sd_round_box(local[i], half[0], ROUNDING)
    d_sph = wp.length(points[i] - sphere_center[0]) - sphere_radius[0]
    sdf[i] = smooth_min(d_box, d_sph, BLEND)


@wp.kernel
def truncate(sdf: wp.array(dtype=float), band: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = band * wp.tanh(sdf[i] / band)


@wp.kernel
def mse(pred: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    r = pred[i] - target[i]
    wp.atomic_add(loss, 0, r * r / float(pred.shape[0]))


@wp.kernel
def target_tsdf(points: wp.array(dtype=wp.vec3), band: float, out: wp.array(dtype=float)):
    # ground truth: a box rotated 0.5 rad about (1, 2, 0)/sqrt(5), unioned with a sphere
    i = wp.tid()
    p = points[i]
    q = wp.quat_from_axis_angle(wp.normalize(wp.vec3(1.0, 2.0, 0.0)), 0.5)
    d_box = sd_round_box(wp.quat_rotate_inv(q, p - wp.vec3(0.1, -0.05, 0.0)), wp.vec3(0.45, 0.25, 0.3), ROUNDING)
    d_sph = wp.length(p - wp.vec3(-0.35, 0.3, 0.2)) - 0.3
    out[i] = band * wp.tanh(smooth_min(d_box, d_sph, BLEND) / band)


class ShapeFitter:
    def __init__(self, batch=512, seed=0):
        self.batch = batch
        self.rng = np.random.default_rng(seed)

        self.box_center = wp.array([wp.vec3(0.0, 0.0, 0.0)], dtype=wp.vec3, requires_grad=True)
        self.box_half = wp.array([wp.vec3(0.3, 0.3, 0.3)], dtype=wp.vec3, requires_grad=True)
        self.box_rotvec = wp.array([wp.vec3(0.0, 0.0, 0.0)], dtype=wp.vec3, requires_grad=True)
        self.sphere_center = wp.array([wp.vec3(-0.2, 0.2, 0.1)], dtype=wp.vec3, requires_grad=True)
        self.sphere_radius = wp.array([0.2], dtype=float, requires_grad=True)
        self.params = [self.box_center, self.box_half, self.box_rotvec, self.sphere_center, self.sphere_radius]

        self.points = wp.zeros(batch, dtype=wp.vec3)
        self.target = wp.zeros(batch, dtype=float)
        self.local = wp.zeros(batch, dtype=wp.vec3, requires_grad=True)
        self.sdf = wp.zeros(batch, dtype=float, requires_grad=True)
        self.tsdf = wp.zeros(batch, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

        self.optimizer = warp.optim.Adam(self.params, lr=0.02)
        self.iteration = 0
        self.sample_batch()

    def sample_batch(self):
        pts = self.rng.uniform(-1.0, 1.0, size=(self.batch, 3)).astype(np.float32)
        self.points.assign(pts)
        wp.launch(target_tsdf, self.batch, inputs=[self.points, TRUNC], outputs=[self.target])

    def forward(self):
        self.loss.zero_()
        wp.launch(to_box_frame, self.batch, inputs=[self.points, self.box_center, self.box_rotvec], outputs=[self.local])
        wp.launch(
            shape_sdf,
            self.batch,
            inputs=[self.points, self.local, self.box_half, self.sphere_center, self.sphere_radius],
            outputs=[self.sdf],
        )
        wp.launch(truncate, self.batch, inputs=[self.sdf, TRUNC], outputs=[self.tsdf])
        wp.launch(mse, self.batch, inputs=[self.tsdf, self.target], outputs=[self.loss])

    def step(self):
        tape = wp.Tape()
        with tape:
            self.forward()
        tape.backward(self.loss)

        print("loss %d %.9g" % (self.iteration, self.loss.numpy()[0]))
        if self.iteration == 0:
            for name in ("box_center", "box_half", "box_rotvec", "sphere_center", "sphere_radius"):
                print("grad", name, fmt(getattr(self, name).grad.numpy()))

        self.optimizer.step([p.grad for p in self.params])

        self.sample_batch()
        self.iteration += 1


def fmt(a):
    return "[" + ", ".join("%.9g" % x for x in np.asarray(a).ravel()) + "]"


if __name__ == "__main__":
    wp.set_device("cpu")
    fitter = ShapeFitter()
    for _ in range(5):
        fitter.step()
