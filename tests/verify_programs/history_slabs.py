"""A history kept as slabs of one array (blind corpus 4's plate_cooling): ``advance`` reads slab ``t`` of ``u``
and writes slab ``t + 1`` of the same array, handed as input and as output; the misfit reads the last slab. No
slab anything read is overwritten: the runtime checks must stay quiet."""

import numpy as np
import warp as wp

wp.config.quiet = True


@wp.kernel
def advance(u: wp.array3d(dtype=float), s_in: int, k: wp.array(dtype=float), u_out: wp.array3d(dtype=float),
            s_out: int):
    i, j = wp.tid()
    c = u[s_in, i, j]
    u_out[s_out, i, j] = c - 0.1 * k[0] * c * c


@wp.kernel
def misfit(u: wp.array3d(dtype=float), s: int, loss: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(loss, 0, u[s, i, j] * u[s, i, j])


k = wp.array(np.array([0.5], dtype=np.float32), requires_grad=True)
u = wp.zeros((9, 4, 4), dtype=float, requires_grad=True)
u0 = wp.array(np.linspace(0.5, 1.0, 16, dtype=np.float32).reshape(1, 4, 4), dtype=float)
loss = wp.zeros(1, dtype=float, requires_grad=True)
for it in range(3):
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.copy(u, u0, count=16)
        for w in range(2):
            for t in range(4 * w, 4 * w + 4):
                wp.launch(advance, dim=(4, 4), inputs=[u, t, k], outputs=[u, t + 1])
            wp.launch(misfit, dim=(4, 4), inputs=[u, 4 * w + 4], outputs=[loss])
    tape.backward(loss)
    print("loss", it, loss.numpy()[0])
    k.assign(k.numpy() - 0.01 * k.grad.numpy())
    tape.zero()
