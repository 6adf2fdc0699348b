"""Correct: fit the stiffness of damped springs (one tape per iteration, tape.zero after the step)."""

import numpy as np
import warp as wp

N = 16
STEPS = 8
DT = 0.05


@wp.kernel
def step(x: wp.array(dtype=float), v: wp.array(dtype=float), k: wp.array(dtype=float),
         x_out: wp.array(dtype=float), v_out: wp.array(dtype=float)):
    i = wp.tid()
    a = -k[i] * x[i] - 0.1 * v[i]
    v_new = v[i] + DT * a
    v_out[i] = v_new
    x_out[i] = x[i] + DT * v_new


@wp.kernel
def loss_kernel(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main():
    rng = np.random.default_rng(3)
    k = wp.array(rng.uniform(1.0, 2.0, N).astype(np.float32), requires_grad=True)
    target = wp.array(rng.uniform(-0.5, 0.5, N).astype(np.float32))
    tape = wp.Tape()
    for it in range(3):
        xs = [wp.array(np.linspace(0.5, 1.0, N).astype(np.float32), requires_grad=True)]
        vs = [wp.zeros(N, dtype=float, requires_grad=True)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            for _ in range(STEPS):
                xs.append(wp.empty_like(xs[-1]))
                vs.append(wp.empty_like(vs[-1]))
                wp.launch(step, dim=N, inputs=[xs[-2], vs[-2], k], outputs=[xs[-1], vs[-1]])
            wp.launch(loss_kernel, dim=N, inputs=[xs[-1], target, loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd, dim=N, inputs=[k, k.grad, 0.1])
        tape.zero()


if __name__ == "__main__":
    main()
