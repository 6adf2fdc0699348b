"""Correct: a sparse stiffness matrix built from the parameter, Dirichlet-projected with warp.fem and solved
with CG between the tape's blocks; the gradient goes through the implicit-function term on the tape
(warp.fem's elastic_shape example, made small).

The stiffness of a chain of springs comes from ``k`` (on the tape), is assembled into a BSR matrix and
projected by ``warp.fem``'s ``project_system_matrix`` (``bsr_copy``, ``bsr_mm``, ``bsr_axpy``: they copy and
zero the ``values`` array of a matrix whose ``scalar_values`` view other launches write), solved untaped
by ``warp.optim.linear.cg``; ``r = f - K(k) u`` on the tape and a ``record_func`` adjoint solve carry
``dL/dk``.
"""

import numpy as np
import warp as wp
import warp.fem as fem
from warp.optim.linear import cg
from warp.sparse import bsr_from_triplets, bsr_set_from_triplets, bsr_zeros

N = 24  # nodes; node 0 is fixed


@wp.kernel
def copy_scaled(k: wp.array(dtype=float), ks: wp.array(dtype=float)):
    i = wp.tid()
    ks[i] = 1.0 * k[i]


@wp.kernel
def triplets(ks: wp.array(dtype=float), rows: wp.array(dtype=int), cols: wp.array(dtype=int),
             vals: wp.array(dtype=float)):
    # spring i joins nodes i and i + 1 (the last one joins node N - 1 to a wall)
    i = wp.tid()
    j = wp.min(i + 1, N - 1)
    s = ks[i]
    rows[4 * i + 0] = i
    cols[4 * i + 0] = i
    vals[4 * i + 0] = s
    rows[4 * i + 1] = j
    cols[4 * i + 1] = j
    vals[4 * i + 1] = wp.where(j == i, 0.0, s)
    rows[4 * i + 2] = i
    cols[4 * i + 2] = j
    vals[4 * i + 2] = wp.where(j == i, 0.0, -s)
    rows[4 * i + 3] = j
    cols[4 * i + 3] = i
    vals[4 * i + 3] = wp.where(j == i, 0.0, -s)


@wp.kernel
def residual(k: wp.array(dtype=float), u: wp.array(dtype=float), f: wp.array(dtype=float),
             r: wp.array(dtype=float)):
    # r = f - K(k) u, matrix-free (node 0 is fixed: its row is the projector's)
    i = wp.tid()
    if i == 0:
        r[i] = 0.0
        return
    ku = k[i] * u[i]
    ku += k[i - 1] * (u[i] - u[i - 1])
    if i + 1 < N:
        ku -= k[i] * u[i + 1]
    r[i] = f[i] - ku


@wp.kernel
def loss_kernel(u: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = u[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main() -> None:
    rng = np.random.default_rng(7)
    k = wp.array(rng.uniform(1.0, 2.0, N).astype(np.float32), requires_grad=True)
    f = wp.array(np.where(np.arange(N) == 0, 0.0, 0.1).astype(np.float32))
    target = wp.array(rng.uniform(0.0, 2.0, N).astype(np.float32))
    fixed = bsr_from_triplets(N, N, wp.array([0], dtype=int), wp.array([0], dtype=int),
                              wp.array([1.0], dtype=float))  # fmt: skip
    tape = wp.Tape()
    for it in range(2):
        ks = wp.zeros(N, dtype=float, requires_grad=True)
        with tape:
            wp.launch(copy_scaled, dim=N, inputs=[k], outputs=[ks])
        rows, cols = wp.empty(4 * N, dtype=int), wp.empty(4 * N, dtype=int)
        vals = wp.empty(4 * N, dtype=float)
        wp.launch(triplets, dim=N, inputs=[ks], outputs=[rows, cols, vals])
        stiffness = bsr_zeros(N, N, block_type=float)
        bsr_set_from_triplets(stiffness, rows, cols, vals)
        fem.project_linear_system(stiffness, wp.clone(f), fixed, normalize_projector=False)
        u = wp.zeros(N, dtype=float, requires_grad=True)
        cg(stiffness, f, u, tol=1e-7, maxiter=200)
        r = wp.zeros(N, dtype=float, requires_grad=True)
        with tape:
            wp.launch(residual, dim=N, inputs=[ks, u, f], outputs=[r])

        def adjoint(stiffness=stiffness, r=r, u=u) -> None:
            cg(stiffness, u.grad, r.grad, tol=1e-7, maxiter=200)

        tape.record_func(adjoint, arrays=[r, u])
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            wp.launch(loss_kernel, dim=N, inputs=[u, target], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]:.7g}")
        wp.launch(sgd, dim=N, inputs=[k, k.grad, 0.01])
        tape.zero()


if __name__ == "__main__":
    main()
