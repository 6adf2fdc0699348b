"""A ``@wp.func_grad`` that differentiates only ``r``: the smoothing ``eps`` is a constant the adjoint never
writes (blind corpus 4's plate_cooling Charbonnier misfit)."""

import numpy as np
import warp as wp

wp.config.quiet = True


@wp.func
def charbonnier(r: float, eps: float):
    return wp.sqrt(r * r + eps)


@wp.func_grad(charbonnier)
def adj_charbonnier(r: float, eps: float, adj_ret: float):
    wp.adjoint[r] += adj_ret * r / wp.sqrt(r * r + eps)


@wp.kernel
def misfit(x: wp.array(dtype=float), eps: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, charbonnier(x[i] - 0.5, eps))


x = wp.array(np.linspace(0.0, 1.0, 8).astype(np.float32), requires_grad=True)
loss = wp.zeros(1, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(misfit, dim=8, inputs=[x, 1e-3], outputs=[loss])
tape.backward(loss)
print("loss", loss.numpy()[0])
