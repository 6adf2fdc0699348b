"""Robust penalties with hand-written adjoints."""

import warp as wp

EPS = 1.0e-3


@wp.func
def smooth_abs(r: float):
    return wp.sqrt(r * r + EPS)


@wp.func_grad(smooth_abs)
def adj_smooth_abs(r: float, adj_ret: float):
    slope = r / wp.sqrt(r * r + EPS)
    wp.adjoint[r] += slope * adj_ret
