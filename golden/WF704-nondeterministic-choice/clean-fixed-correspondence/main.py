"""Register a scanned point set to a model: optimise a translation that minimises the distance
from every scanned point to its nearest model point (a one-sided chamfer loss),
with correspondences fixed outside the tape as in ICP."""

import numpy as np
import warp as wp

N = 32
M = 8


@wp.kernel
def correspond(
    offset: wp.array(dtype=wp.vec3),
    scan: wp.array(dtype=wp.vec3),
    model: wp.array(dtype=wp.vec3),
    nearest: wp.array(dtype=int),
):
    i = wp.tid()
    p = scan[i] + offset[0]
    best = float(1.0e10)
    k = int(0)
    for j in range(M):
        d = wp.length_sq(p - model[j])
        if d < best:
            best = d
            k = j
    nearest[i] = k


@wp.kernel
def matched_distance(
    offset: wp.array(dtype=wp.vec3),
    scan: wp.array(dtype=wp.vec3),
    model: wp.array(dtype=wp.vec3),
    nearest: wp.array(dtype=int),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    p = scan[i] + offset[0]
    wp.atomic_add(loss, 0, wp.length_sq(p - model[nearest[i]]))


@wp.kernel
def sgd_step(p: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def forward(offset, scan, model, nearest, loss):
    wp.launch(matched_distance, dim=N, inputs=[offset, scan, model, nearest], outputs=[loss])


def match(offset, scan, model):
    nearest = wp.zeros(N, dtype=int)
    wp.launch(correspond, dim=N, inputs=[offset, scan, model], outputs=[nearest])
    return nearest


def setup():
    rng = np.random.default_rng(6)
    model_pts = rng.uniform(-1.0, 1.0, (M, 3))
    scan_pts = model_pts[rng.integers(0, M, N)] + rng.normal(0.0, 0.05, (N, 3)) - np.array([0.3, -0.2, 0.1])
    scan = wp.array(scan_pts, dtype=wp.vec3)
    model = wp.array(model_pts, dtype=wp.vec3)
    offset = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
    return offset, (scan, model, match(offset, scan, model))


def main():
    offset, (scan, model, _) = setup()
    tape = wp.Tape()
    for it in range(3):
        nearest = match(offset, scan, model)  # correspondences are chosen outside the tape (ICP)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(offset, scan, model, nearest, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=1, inputs=[offset, offset.grad, 0.005])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
