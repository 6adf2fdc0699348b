"""A light source fit: each iteration pools the irradiance of 64 sensors into one total with atomic adds
and fits the total to a target. A fresh tape per iteration; only the parameter's gradient is zeroed."""

import numpy as np
import warp as wp

wp.config.quiet = True


@wp.kernel
def irradiance(pos: wp.array(dtype=float), power: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    d = pos[i] - 0.25
    wp.atomic_add(total, 0, power[0] / (1.0 + d * d))


@wp.kernel
def misfit(total: wp.array(dtype=float), target: float, loss: wp.array(dtype=float)):
    r = total[0] - target
    loss[0] = r * r


@wp.kernel
def descend(power: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    power[0] = power[0] - lr * grad[0]


sensors = wp.array(np.linspace(0.0, 1.0, 64), dtype=float)
power = wp.array([1.0], dtype=float, requires_grad=True)
total = wp.zeros(1, dtype=float, requires_grad=True)  # allocated once, only accumulated into on the tape
loss = wp.zeros(1, dtype=float, requires_grad=True)

for it in range(4):
    total.zero_()
    power.grad.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(irradiance, 64, inputs=[sensors, power], outputs=[total])
        wp.launch(misfit, 1, inputs=[total, 40.0], outputs=[loss])
    tape.backward(loss)
    if it == 0:
        print(f"loss0 = {loss.numpy()[0]}")
    print(f"iteration {it}: loss {loss.numpy()[0]:.6f} dloss/dpower {power.grad.numpy()[0]:.6f}")
    wp.launch(descend, 1, inputs=[power, power.grad, 1.0e-4])
    tape.zero()
