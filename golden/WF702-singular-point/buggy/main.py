"""Find the rest shape of a hanging chain by gradient descent on its energy (springs plus
gravity). The chain starts folded: its first two particles coincide at the anchor."""

import numpy as np
import warp as wp

N = 12
REST = 0.25
K = 200.0


@wp.kernel
def spring_energy(p: wp.array(dtype=wp.vec3), rest: float, k: float, energy: wp.array(dtype=float)):
    i = wp.tid()
    d = p[i + 1] - p[i]
    length = wp.sqrt(wp.dot(d, d))
    stretch = length - rest
    wp.atomic_add(energy, 0, 0.5 * k * stretch * stretch)


@wp.kernel
def gravity_energy(p: wp.array(dtype=wp.vec3), energy: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(energy, 0, 9.8 * p[i][1])


@wp.kernel
def descend(p: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    if i > 0:  # particle 0 is the anchor
        p[i] = p[i] - lr * grad[i]


def forward(p, loss):
    wp.launch(spring_energy, dim=N - 1, inputs=[p, REST, K], outputs=[loss])
    wp.launch(gravity_energy, dim=N, inputs=[p], outputs=[loss])


def setup():
    pts = np.zeros((N, 3))
    pts[2:, 0] = REST * np.arange(1, N - 1)  # particle 1 sits on the anchor
    pts[2:, 1] = -0.05 * np.arange(1, N - 1)
    p = wp.array(pts, dtype=wp.vec3, requires_grad=True)
    return p, ()


def main():
    p, () = setup()
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(p, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"finite gradient: {bool(np.isfinite(p.grad.numpy()).all())}")
        wp.launch(descend, dim=N, inputs=[p, p.grad, 1.0e-3])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
