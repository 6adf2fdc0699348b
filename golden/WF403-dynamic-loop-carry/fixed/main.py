"""Tomography: recover the densities of a row of cells from the transmittance of rays that
cross them (Beer-Lambert attenuation, one product factor per cell)."""

import numpy as np
import warp as wp

CELLS = 12
RAYS = 24


@wp.kernel
def transmittance(
    sigma: wp.array(dtype=float),
    seg: wp.array(dtype=float),
    n_cells: int,
    image: wp.array(dtype=float),
):
    i = wp.tid()
    t = float(1.0)
    for j in range(wp.static(CELLS)):
        t = t * wp.exp(-sigma[j] * seg[i * n_cells + j])
    image[i] = t


@wp.kernel
def image_loss(image: wp.array(dtype=float), observed: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = image[i] - observed[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def forward(sigma, seg, observed, loss):
    image = wp.empty(RAYS, dtype=float, requires_grad=True)
    wp.launch(transmittance, dim=RAYS, inputs=[sigma, seg, CELLS], outputs=[image])
    wp.launch(image_loss, dim=RAYS, inputs=[image, observed], outputs=[loss])


def setup():
    rng = np.random.default_rng(3)
    seg = wp.array(rng.uniform(0.0, 0.3, RAYS * CELLS), dtype=float)
    true_sigma = rng.uniform(0.5, 2.0, CELLS)
    observed = wp.array(np.exp(-(seg.numpy().reshape(RAYS, CELLS) @ true_sigma)), dtype=float)
    sigma = wp.full(CELLS, 1.0, dtype=float, requires_grad=True)
    return sigma, (seg, observed)


def main():
    sigma, (seg, observed) = setup()
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(sigma, seg, observed, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=CELLS, inputs=[sigma, sigma.grad, 0.5])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
