"""Spark emitter: particles that rise above a threshold emit a spark (and are counted); tune
their launch heights so that the emitted sparks carry a target energy."""

import numpy as np
import warp as wp

N = 64
THRESHOLD = 0.5


@wp.kernel
def emit(
    h: wp.array(dtype=float),
    counter: wp.array(dtype=int),
    sparks: wp.array(dtype=float),
):
    tid = wp.tid()
    if h[tid] > THRESHOLD:
        wp.atomic_add(counter, 0, 1)  # only counts the sparks; each keeps its particle's slot
        sparks[tid] = 9.8 * h[tid] * h[tid]


@wp.kernel
def energy_loss(sparks: wp.array(dtype=float), target: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = sparks[i] - target
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def forward(h, loss):
    counter = wp.zeros(1, dtype=int)
    sparks = wp.zeros(N, dtype=float, requires_grad=True)
    wp.launch(emit, dim=N, inputs=[h, counter], outputs=[sparks])
    wp.launch(energy_loss, dim=N, inputs=[sparks, 6.0], outputs=[loss])


def setup():
    rng = np.random.default_rng(9)
    h = wp.array(rng.uniform(0.0, 1.0, N), dtype=float, requires_grad=True)
    return h, ()


def main():
    h, () = setup()
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(h, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=N, inputs=[h, h.grad, 1.0e-3])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
