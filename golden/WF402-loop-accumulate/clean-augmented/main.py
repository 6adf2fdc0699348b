"""Fit the stiffness of a spring network so that its summed elastic tensor matches a measured one.
A @wp.func accumulates a 2x2 tensor over the springs of a node, one component at a time, with `+=`."""

import numpy as np
import warp as wp

N = 8
K = 4


@wp.func
def node_tensor(d: wp.array(dtype=wp.vec2), k: wp.array(dtype=float), node: int):
    m = wp.mat22(0.0)
    for s in range(K):
        e = d[node * K + s]
        m[0, 0] += k[node] * e[0] * e[0]
        m[0, 1] += k[node] * e[0] * e[1]
        m[1, 0] += k[node] * e[1] * e[0]
        m[1, 1] += k[node] * e[1] * e[1]
    return m


@wp.kernel
def misfit(d: wp.array(dtype=wp.vec2), k: wp.array(dtype=float), measured: wp.array(dtype=wp.mat22),
           loss: wp.array(dtype=float)):
    node = wp.tid()
    r = node_tensor(d, k, node) - measured[node]
    wp.atomic_add(loss, 0, wp.ddot(r, r))


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main():
    rng = np.random.default_rng(4)
    d = wp.array(rng.uniform(-1.0, 1.0, (N * K, 2)), dtype=wp.vec2)
    k = wp.array(np.ones(N), dtype=float, requires_grad=True)
    measured = wp.array(rng.uniform(0.0, 2.0, (N, 2, 2)), dtype=wp.mat22)
    for it in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(misfit, dim=N, inputs=[d, k, measured], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd, dim=N, inputs=[k, k.grad, 0.01])
        tape.zero()


if __name__ == "__main__":
    main()
