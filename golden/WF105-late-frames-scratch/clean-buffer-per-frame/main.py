"""Lift a falling chain of particles: a constant push is optimised so that the chain's centre tracks a
target height over the second half of the rollout (frames FRAMES // 2 and later)."""

import numpy as np
import warp as wp

N = 4
FRAMES = 8
DT = 0.05
ITERS = 3
LR = 0.5


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    push: wp.array(dtype=wp.vec3),
    dt: float,
    q_out: wp.array(dtype=wp.vec3),
    qd_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    v = 0.98 * qd[i] + dt * (push[0] + wp.vec3(0.0, -9.8, 0.0))
    qd_out[i] = v
    q_out[i] = q[i] + dt * v


@wp.kernel
def centroid(q: wp.array(dtype=wp.vec3), c: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    wp.atomic_add(c, 0, q[i] / float(q.shape[0]))


@wp.kernel
def tracking_loss(c: wp.array(dtype=wp.vec3), height: float, weight: float, loss: wp.array(dtype=float)):
    d = c[0][1] - height
    wp.atomic_add(loss, 0, weight * d * d)


@wp.kernel
def step_kernel(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), rate: float):
    i = wp.tid()
    x[i] = x[i] - grad[i] * rate


class Chain:
    def __init__(self):
        start = np.stack([0.1 * np.arange(N), np.ones(N), np.zeros(N)], 1).astype(np.float32)
        self.q = [wp.array(start, dtype=wp.vec3, requires_grad=True)]
        self.q += [wp.zeros(N, dtype=wp.vec3, requires_grad=True) for _ in range(FRAMES)]
        self.qd = [wp.zeros(N, dtype=wp.vec3, requires_grad=True) for _ in range(FRAMES + 1)]
        self.centres = [wp.zeros(1, dtype=wp.vec3, requires_grad=True) for _ in range(FRAMES)]  # one per frame


def frame_cost(chain, frame, loss):
    c = chain.centres[frame]
    c.zero_()
    wp.launch(centroid, dim=N, inputs=[chain.q[frame + 1]], outputs=[c])
    if frame >= FRAMES // 2:
        wp.launch(tracking_loss, dim=1, inputs=[c, 1.2, 1.0 / (FRAMES - FRAMES // 2)], outputs=[loss])


def rollout(chain, push, loss):
    for frame in range(FRAMES):
        wp.launch(
            integrate,
            dim=N,
            inputs=[chain.q[frame], chain.qd[frame], push, DT],
            outputs=[chain.q[frame + 1], chain.qd[frame + 1]],
        )
        frame_cost(chain, frame, loss)


def main():
    chain = Chain()
    push = wp.array([wp.vec3(0.0, 9.0, 0.0)], dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    for it in range(ITERS):
        tape.reset()
        loss.zero_()
        with tape:
            rollout(chain, push, loss)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        print(f"iter {it}: loss = {loss.numpy()[0]:.5f}  grad = {push.grad.numpy()[0]}")
        wp.launch(step_kernel, dim=1, inputs=[push, push.grad, LR])


if __name__ == "__main__":
    main()
