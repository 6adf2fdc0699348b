"""Find the constant push that brings a thrown particle onto a target. The rollout is driven in
segments of SEGMENT steps (the way a long horizon is streamed); the last segment ends at the rollout's
end, so its length is min(SEGMENT, what is left)."""

import warp as wp

from rollout import Rollout, distance

SEGMENT = 4
ITERS = 3
LR = 0.05


@wp.kernel
def step_kernel(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), rate: float):
    i = wp.tid()
    x[i] = x[i] - grad[i] * rate


def main():
    rollout = Rollout()
    push = wp.array([wp.vec3(0.0, 5.0, 0.0)], dtype=wp.vec3, requires_grad=True)
    target = wp.vec3(1.0, 0.2, 0.0)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(ITERS):
        loss.zero_()
        push.grad.zero_()
        for first in range(0, rollout.steps, SEGMENT):
            tape = wp.Tape()
            with tape:
                rollout.run_segment(first, min(first + SEGMENT, rollout.steps), push)
                if first + SEGMENT >= rollout.steps:
                    wp.launch(distance, dim=1, inputs=[rollout.q[-1], target], outputs=[loss])
            tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        print(f"iter {it}: loss = {loss.numpy()[0]:.5f}  grad = {push.grad.numpy()[0]}")
        wp.launch(step_kernel, dim=1, inputs=[push, push.grad, LR])


if __name__ == "__main__":
    main()
