"""Kernels of the spring-chain training script (a multi-file program for verify tests)."""

import warp as wp

DT = 0.05


@wp.func
def drag(v: float, c: float):
    return c * v * wp.abs(v)


@wp.func_grad(drag)
def adj_drag(v: float, c: float, adj_ret: float):
    wp.adjoint[v] += 2.0 * c * wp.abs(v) * adj_ret
    wp.adjoint[c] += v * wp.abs(v) * adj_ret


@wp.func
def drag_bad(v: float, c: float):
    return c * v * wp.abs(v)


@wp.func_grad(drag_bad)
def adj_drag_bad(v: float, c: float, adj_ret: float):
    # wrong: the derivative of c*v*|v| with respect to v is 2c|v|, and this doubles it again
    wp.adjoint[v] += 4.0 * c * wp.abs(v) * adj_ret
    wp.adjoint[c] += 2.0 * v * wp.abs(v) * adj_ret


@wp.kernel
def forces(x: wp.array(dtype=float), v: wp.array(dtype=float), k: wp.array(dtype=float),
           f: wp.array(dtype=float)):
    i = wp.tid()
    f[i] = -k[i] * x[i] - drag(v[i], 0.3)


@wp.kernel
def forces_bad_adjoint(x: wp.array(dtype=float), v: wp.array(dtype=float), k: wp.array(dtype=float),
                       f: wp.array(dtype=float)):
    i = wp.tid()
    f[i] = -k[i] * x[i] - drag_bad(v[i], 0.3)


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), f: wp.array(dtype=float),
              x_out: wp.array(dtype=float), v_out: wp.array(dtype=float)):
    i = wp.tid()
    v_new = v[i] + DT * wp.tanh(f[i])
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
