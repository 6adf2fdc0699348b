"""Push a hanging net sideways: learn one horizontal force per column so the
bottom row ends up at a target offset. Simulation lives in sim.py."""

import numpy as np
import warp as wp

import sim

wp.config.log_level = wp.LOG_WARNING
wp.set_device("cpu")


@wp.kernel
def expand_columns(u_col: wp.array(dtype=float), cols: int, u: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    u[i] = wp.vec3(u_col[i % cols], 0.0, 0.0)


@wp.kernel
def bottom_row_loss(
    x: wp.array(dtype=wp.vec3),
    first: int,
    target: wp.array(dtype=wp.vec3),
    loss: wp.array(dtype=float),
):
    j = wp.tid()
    d = x[first + j] - target[j]
    wp.atomic_add(loss, 0, d[0] * d[0] + d[1] * d[1])


@wp.kernel
def sgd_decay(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float, decay: float):
    i = wp.tid()
    p[i] = (1.0 - decay) * p[i] - lr * g[i]


def main(iters=4):
    net = sim.Net()
    first = (net.rows - 1) * net.cols
    x0 = net.x0.numpy()
    target = wp.array(x0[first:] + np.array([0.12, -0.02, 0.0], dtype=np.float32), dtype=wp.vec3)

    u_col = wp.zeros(net.cols, dtype=float, requires_grad=True)
    u = wp.zeros(net.n, dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    for it in range(iters):
        net.reset()
        loss.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(expand_columns, dim=net.n, inputs=[u_col, net.cols], outputs=[u])
            x_final = net.rollout(u)
            wp.launch(bottom_row_loss, dim=net.cols, inputs=[x_final, first, target], outputs=[loss])
        tape.backward(loss)
        print(f"loss {it} {loss.numpy()[0]:.9g}")
        if it == 0:
            print("grad", "u_col", np.array2string(u_col.grad.numpy().ravel()[:8], precision=9))
        wp.launch(sgd_decay, dim=net.cols, inputs=[u_col, u_col.grad, 2.0, 0.01])
        tape.zero()


if __name__ == "__main__":
    main()
