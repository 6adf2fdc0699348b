"""Shape a heat profile: optimise per-cell source strengths so that a quadratic response, computed
by a hand-written native snippet, matches the measured temperatures."""

import numpy as np
import warp as wp

N = 32


@wp.func_native(
    "t[tid] = c * q[tid] * q[tid];",
    adj_snippet="adj_q[tid] += 2.0f * c * q[tid] * adj_t[tid];",
)
def response(c: float, q: wp.array(dtype=float), t: wp.array(dtype=float), tid: int): ...


@wp.kernel
def heat(q: wp.array(dtype=float), t: wp.array(dtype=float)):
    tid = wp.tid()
    response(0.8, q, t, tid)


@wp.kernel
def profile_loss(t: wp.array(dtype=float), measured: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = t[i] - measured[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def forward(q, measured, loss):
    t = wp.zeros(N, dtype=float, requires_grad=True)
    wp.launch(heat, dim=N, inputs=[q], outputs=[t])
    wp.launch(profile_loss, dim=N, inputs=[t, measured], outputs=[loss])


def setup():
    rng = np.random.default_rng(8)
    measured = wp.array(rng.uniform(0.5, 1.5, N), dtype=float)
    q = wp.full(N, 1.0, dtype=float, requires_grad=True)
    return q, (measured,)


def main():
    q, (measured,) = setup()
    tape = wp.Tape()
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            forward(q, measured, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=N, inputs=[q, q.grad, 0.05])
        tape.zero()
        tape.reset()


if __name__ == "__main__":
    main()
