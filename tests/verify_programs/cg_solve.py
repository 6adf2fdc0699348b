"""Correct: a float32 CG solve between the tape's two blocks (warp.fem's elastic_shape and darcy_ls shape).

The right-hand side comes from the parameter on the tape; ``warp.optim.linear.cg`` solves ``A u = b``
untaped, checking its residual on the host every 10 iterations; ``tape.record_func`` carries the
adjoint solve; the loss reads ``u`` on the tape. The solver's dot products store their sums with
``wp.tile_store`` into a view of the output buffer, a write Warp's read/write flags do not show.
"""

import numpy as np
import warp as wp
from warp.optim.linear import cg

N = 96


@wp.kernel
def rhs(x: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = wp.sin(x[i]) + 0.5 * x[i] * x[i]


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
    rng = np.random.default_rng(5)
    # a 1D Laplacian with a weak diagonal: badly conditioned, CG needs most of its N iterations in float32
    lap = 2.02 * np.eye(N) - np.eye(N, k=1) - np.eye(N, k=-1)
    a = wp.array(lap.astype(np.float32))
    x = wp.array(rng.uniform(-1.0, 1.0, N).astype(np.float32), requires_grad=True)
    target = wp.array(rng.uniform(-2.0, 2.0, N).astype(np.float32))
    tape = wp.Tape()
    for it in range(2):
        b = wp.zeros(N, dtype=float, requires_grad=True)
        u = wp.zeros(N, dtype=float, requires_grad=True)
        with tape:
            wp.launch(rhs, dim=N, inputs=[x], outputs=[b])
        iters, _, _ = cg(a, b, u, tol=1e-6, maxiter=1000, check_every=10)

        def adjoint(b=b, u=u) -> None:
            cg(a, u.grad, b.grad, tol=1e-6, maxiter=1000, check_every=10)

        tape.record_func(adjoint, arrays=[b, u])
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            wp.launch(loss_kernel, dim=N, inputs=[u, target], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]:.7g} after {iters} CG iterations")
        wp.launch(sgd, dim=N, inputs=[x, x.grad, 0.001])
        tape.zero()


if __name__ == "__main__":
    main()
