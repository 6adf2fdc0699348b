"""A parameter the tape reaches only through host code: ``thrust`` is centred with numpy, the result assigned
into ``centered`` and the centring's adjoint recorded with ``tape.record_func``; the update is a host
``thrust.assign(thrust.numpy() - lr * thrust.grad.numpy())`` (blind corpus 4's orbit_burn)."""

import numpy as np
import warp as wp

wp.config.quiet = True


@wp.kernel
def cost(u: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, u[i] * u[i] * u[i])


thrust = wp.array(np.linspace(0.5, 1.5, 8).astype(np.float32), requires_grad=True)
centered = wp.zeros(8, requires_grad=True)
loss = wp.zeros(1, requires_grad=True)
for it in range(3):
    tape = wp.Tape()
    loss.zero_()
    with tape:
        u = thrust.numpy()
        centered.assign(u - 0.5 * u.mean())

        def back():
            g = centered.grad.numpy()
            thrust.grad.assign(thrust.grad.numpy() + g - 0.5 * g.mean())

        tape.record_func(back, arrays=[thrust, centered])
        wp.launch(cost, dim=8, inputs=[centered], outputs=[loss])
    tape.backward(loss)
    print("loss", it, loss.numpy()[0])
    thrust.assign(thrust.numpy() - 0.01 * thrust.grad.numpy())
    tape.zero()
