"""Move a cloud of points onto targets, level-set style (like Warp's fem darcy_ls example): the
points are advected by a velocity field, the velocity's adjoint is the descent direction. The tape
is recorded in two blocks (the advection, then the loss), with an untaped step in between; the
update step belongs after the backward."""

import numpy as np
import warp as wp

N = 12


@wp.kernel
def advect(q_in: wp.array(dtype=wp.vec2), vel: wp.array(dtype=wp.vec2), dt: float, q_out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    q_out[i] = q_in[i] + dt * vel[i]


@wp.kernel
def target_loss(q: wp.array(dtype=wp.vec2), target: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Example:
    def __init__(self, lr):
        rng = np.random.default_rng(5)
        self._lr = lr
        self._q = wp.array(rng.uniform(-1.0, 1.0, (N, 2)), dtype=wp.vec2, requires_grad=True)
        self._target = wp.array(rng.uniform(-1.0, 1.0, (N, 2)), dtype=wp.vec2)
        self._vel = wp.zeros(N, dtype=wp.vec2, requires_grad=True)

    def step(self):
        v = self._vel
        v.zero_()
        advected = wp.zeros(N, dtype=wp.vec2, requires_grad=True)

        tape = wp.Tape()
        with tape:
            # dummy advection step, so that the backward pass computes the adjoint of the velocity
            wp.launch(advect, dim=N, inputs=[self._q, v, 1.0], outputs=[advected])
            descent = v.grad  # a reference: the values are read after the backward

        spread = float(np.linalg.norm(advected.numpy()))

        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            wp.launch(target_loss, dim=N, inputs=[advected, self._target], outputs=[loss])

        tape.backward(loss=loss)
        v.assign(descent)
        # advect the points with the velocity adjoint
        wp.launch(advect, dim=N, inputs=[advected, v, -self._lr], outputs=[self._q])

        tape.zero()
        return float(loss.numpy()[0]), spread


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        example = Example(lr=0.1)
        for it in range(4):
            loss, spread = example.step()
            if it == 0:
                print(f"loss0 = {loss}")
                print(f"forward: spread = {spread}")
        print(f"loss = {loss}")
