"""A trained parameter FD cannot judge beside leaves it can: the loss adds 120 steps of the logistic
map of ``r`` (chaotic: FD disagrees with itself) to a shading term of ``albedo`` and ``normals``, which
the program does not train. The shading kernel's Lambert sum is a dynamic loop whose result is used
non-linearly after it (WF403): backward gives ``albedo`` no gradient at all."""

import numpy as np
import warp as wp

N = 8
STEPS = 120


@wp.struct
class Lights:
    dirs: wp.array(dtype=wp.vec3)
    num_lights: int


@wp.kernel
def logistic(x: wp.array(dtype=float), r: wp.array(dtype=float), x_out: wp.array(dtype=float)):
    i = wp.tid()
    x_out[i] = r[i] * x[i] * (1.0 - x[i])


@wp.kernel
def shade(normals: wp.array(dtype=wp.vec3), albedo: wp.array(dtype=float), lights: Lights,
          x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    color = albedo[i]
    lambert = float(0.0)  # noqa: UP018 - a Warp local a dynamic loop updates needs a typed constructor
    for j in range(lights.num_lights):
        val = wp.dot(normals[i], lights.dirs[j])
        if val < 0.0:
            val = 0.0
        lambert = lambert + val
    d = lambert * color - 0.3
    wp.atomic_add(loss, 0, x[i] + d * d)


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def main():
    rng = np.random.default_rng(3)
    n = rng.normal(size=(N, 3)) + np.array([0.0, 0.0, 1.5])
    normals = wp.array(n / np.linalg.norm(n, axis=1, keepdims=True), dtype=wp.vec3, requires_grad=True)
    albedo = wp.array(rng.uniform(0.4, 0.9, N), dtype=float, requires_grad=True)
    lights = Lights()
    lights.dirs = wp.array(np.array([[0.0, 0.0, 1.0], [0.6, 0.0, 0.8]]), dtype=wp.vec3)
    lights.num_lights = 2
    r = wp.array(np.full(N, 3.9, dtype=np.float32), requires_grad=True)
    for it in range(2):
        xs = [wp.array(np.linspace(0.2, 0.7, N).astype(np.float32))]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for _ in range(STEPS):
                xs.append(wp.empty_like(xs[-1], requires_grad=True))
                wp.launch(logistic, dim=N, inputs=[xs[-2], r], outputs=[xs[-1]])
            wp.launch(shade, dim=N, inputs=[normals, albedo, lights, xs[-1]], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd_step, dim=N, inputs=[r, r.grad, 0.0])
        tape.zero()


if __name__ == "__main__":
    main()
