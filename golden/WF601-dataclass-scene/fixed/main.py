"""Push a thrown particle onto a target: a constant push is optimised through a rollout of FRAMES frames
of SUBSTEPS steps. What the rollout needs is held by a dataclass, built with keywords."""

from dataclasses import dataclass, field

import warp as wp

FRAMES = 4
SUBSTEPS = 3
DT = 0.05
ITERS = 3
LR = 0.05


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    push: wp.array(dtype=wp.vec3),
    damping: float,
    dt: float,
    q_out: wp.array(dtype=wp.vec3),
    qd_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    v = damping * qd[i] + dt * (push[0] + wp.vec3(0.0, -9.8, 0.0))
    qd_out[i] = v
    q_out[i] = q[i] + dt * v


@wp.kernel
def distance(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[0] - target
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def step_kernel(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), rate: float):
    i = wp.tid()
    x[i] = x[i] - grad[i] * rate


class State:
    def __init__(self):
        self.q = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
        self.qd = wp.zeros(1, dtype=wp.vec3, requires_grad=True)


class DampedSolver:
    def __init__(self, damping):
        self.damping = damping

    def step(self, state_in, state_out, push, dt):
        wp.launch(integrate, dim=1, inputs=[state_in.q, state_in.qd, push, self.damping, dt], outputs=[state_out.q, state_out.qd])


class FreeSolver:
    def step(self, state_in, state_out, push, dt):
        wp.launch(integrate, dim=1, inputs=[state_in.q, state_in.qd, push, 1.0, dt], outputs=[state_out.q, state_out.qd])


@dataclass
class Scene:
    solver: object
    target: wp.vec3
    states: list = field(default_factory=list)


def build_scene():
    scene = Scene(solver=DampedSolver(0.98), target=wp.vec3(1.0, 0.2, 0.0))
    scene.states = [State() for _ in range(FRAMES * SUBSTEPS + 1)]
    scene.states[0].qd.assign([wp.vec3(1.0, 2.0, 0.0)])
    return scene


def simulate_frame(scene, frame, push):
    for s in range(SUBSTEPS):
        t = frame * SUBSTEPS + s
        scene.solver.step(scene.states[t], scene.states[t + 1], push, DT)


def main():
    scene = build_scene()
    push = wp.array([wp.vec3(0.0, 5.0, 0.0)], dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(ITERS):
        loss.zero_()
        push.grad.zero_()
        tape = wp.Tape()
        with tape:
            for frame in range(FRAMES):
                simulate_frame(scene, frame, push)
                if frame == FRAMES - 1:
                    wp.launch(distance, dim=1, inputs=[scene.states[-1].q, scene.target], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        print(f"iter {it}: loss = {loss.numpy()[0]:.5f}  grad = {push.grad.numpy()[0]}")
        wp.launch(step_kernel, dim=1, inputs=[push, push.grad, LR])


if __name__ == "__main__":
    main()
