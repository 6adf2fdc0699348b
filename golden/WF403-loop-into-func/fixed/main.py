"""Shading: fit per-pixel albedo so that the lit image matches a target. The lights are a struct
whose count is set at run time, so the Lambert sum over them is a dynamic loop (the shape of
Warp's own diffray example)."""

from typing import Any

import numpy as np
import warp as wp

PIXELS = 16


@wp.struct
class Lights:
    dirs: wp.array(dtype=wp.vec3)
    intensities: wp.array(dtype=float)
    num_lights: int


@wp.func
def _shade_loop(lights: Any, normals: Any, i: Any, lambert: Any):
    for j in range(lights.num_lights):
        val = lights.intensities[j] * wp.dot(normals[i], lights.dirs[j])
        if val < 0.0:
            val = 0.0
        lambert = lambert + val
    return lambert


@wp.kernel
def shade(normals: wp.array(dtype=wp.vec3), albedo: wp.array(dtype=float), lights: Lights,
          image: wp.array(dtype=float)):
    i = wp.tid()
    color = albedo[i]
    # lambertian directional lighting
    lambert = float(0.0)
    lambert = _shade_loop(lights, normals, i, lambert)
    image[i] = lambert * color


@wp.kernel
def image_loss(image: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = image[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def main():
    rng = np.random.default_rng(5)
    n = rng.normal(size=(PIXELS, 3))
    normals = wp.array(n / np.linalg.norm(n, axis=1, keepdims=True), dtype=wp.vec3)
    lights = Lights()
    lights.dirs = wp.array(np.array([[0.0, 0.0, 1.0], [0.6, 0.0, 0.8]]), dtype=wp.vec3)
    lights.intensities = wp.array(np.array([1.0, 0.5]), dtype=float)
    lights.num_lights = 2
    albedo = wp.full(PIXELS, 0.5, dtype=float, requires_grad=True)
    target = wp.array(rng.uniform(0.0, 1.0, PIXELS), dtype=float)
    image = wp.zeros(PIXELS, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(3):
        tape = wp.Tape()
        with tape:
            wp.launch(shade, dim=PIXELS, inputs=[normals, albedo, lights], outputs=[image])
            wp.launch(image_loss, dim=PIXELS, inputs=[image, target], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
            print(f"forward: image = {image.numpy().tolist()}")
            print(f"albedo grad = {albedo.grad.numpy().tolist()}")
        wp.launch(sgd_step, dim=PIXELS, inputs=[albedo, albedo.grad, 0.2])
        tape.zero()
        loss.zero_()


if __name__ == "__main__":
    main()
