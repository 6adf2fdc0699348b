"""Turn a rigid body so that its rotated points reach a target: optimise a quaternion held by a struct.
Clean: the step clears the gradient it read through `tape.gradients[self.body.rot]` (a local bound to the
gradient array itself) once the optimizer consumed it."""

import numpy as np
import warp as wp

N = 8


@wp.struct
class Body:
    rot: wp.array(dtype=wp.quat)
    pos: wp.array(dtype=wp.vec3)


@wp.kernel
def rotate(body: Body, points: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = wp.quat_rotate(body.rot[0], points[i]) + body.pos[0]


@wp.kernel
def distance(out: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = out[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def descend(rot: wp.array(dtype=wp.quat), grad: wp.array(dtype=wp.quat), lr: float):
    rot[0] = wp.normalize(rot[0] - lr * grad[0])


class Example:
    def __init__(self):
        rng = np.random.default_rng(1)
        self.points = wp.array(rng.standard_normal((N, 3)), dtype=wp.vec3)
        q = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.7)
        self.target = wp.array([wp.quat_rotate(q, wp.vec3(*p)) for p in self.points.numpy()], dtype=wp.vec3)
        self.body = Body()
        self.body.rot = wp.array([wp.quat_identity()], dtype=wp.quat, requires_grad=True)
        self.body.pos = wp.zeros(1, dtype=wp.vec3)
        self.out = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = None

    def forward(self):
        wp.launch(rotate, dim=N, inputs=[self.body, self.points], outputs=[self.out])
        wp.launch(distance, dim=N, inputs=[self.out, self.target], outputs=[self.loss])

    def step(self):
        self.loss.zero_()
        self.tape = wp.Tape()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)
        rot_grad = self.tape.gradients[self.body.rot]
        wp.launch(descend, dim=1, inputs=[self.body.rot, rot_grad, 0.02])
        rot_grad.zero_()  # the gradient array itself: cleared once the step consumed it


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        example = Example()
        for it in range(4):
            example.step()
            if it == 0:
                print(f"loss0 = {example.loss.numpy()[0]}")
            print(f"iter {it}: loss = {example.loss.numpy()[0]:.5f}")
