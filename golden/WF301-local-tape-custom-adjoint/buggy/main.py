"""Fit a conductivity field so that a diagonal "solve" matches target values. Like Warp's
example_darcy_ls_optimization: each step records on a fresh local tape, the solve's adjoint is written by
hand (`tape.record_func`), and the gradient is consumed by copying it into a velocity array
(`velocity.assign(k.grad)`) that moves the field afterwards. The field `k` lives across steps, and
so does `k.grad`: without `tape.zero()` after the consumer, each step's gradient is summed into the next."""

import numpy as np
import warp as wp

N = 32
A = 4.0  # the diagonal of the "linear system": x = rhs / A


@wp.kernel
def assemble(k: wp.array(dtype=float), rhs: wp.array(dtype=float)):
    i = wp.tid()
    rhs[i] = k[i] * k[i] + 1.0


@wp.kernel
def solve(rhs: wp.array(dtype=float), a: float, x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = rhs[i] / a


@wp.kernel
def solve_adjoint(x_grad: wp.array(dtype=float), a: float, rhs_grad: wp.array(dtype=float)):
    i = wp.tid()
    rhs_grad[i] += x_grad[i] / a


@wp.kernel
def mismatch(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def advect(k: wp.array(dtype=float), velocity: wp.array(dtype=float), dt: float):
    i = wp.tid()
    k[i] = k[i] - dt * velocity[i]


class Example:
    def __init__(self):
        rng = np.random.default_rng(3)
        self.k = wp.array(1.0 + 0.1 * rng.standard_normal(N), dtype=float, requires_grad=True)
        self.target = wp.array(0.5 + 0.2 * rng.random(N), dtype=float)
        self.velocity = wp.zeros(N, dtype=float)

    def step(self):
        rhs = wp.empty(N, dtype=float, requires_grad=True)
        x = wp.empty(N, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(assemble, dim=N, inputs=[self.k], outputs=[rhs])
        wp.launch(solve, dim=N, inputs=[rhs, A], outputs=[x])

        def solve_backward():
            wp.launch(solve_adjoint, dim=N, inputs=[x.grad, A], outputs=[rhs.grad])

        tape.record_func(solve_backward, arrays=(rhs, x))
        with tape:
            wp.launch(mismatch, dim=N, inputs=[x, self.target], outputs=[loss])
        tape.backward(loss=loss)

        # move the field along the gradient
        self.velocity.assign(self.k.grad)
        wp.launch(advect, dim=N, inputs=[self.k, self.velocity, 0.5])
        return float(loss.numpy()[0])


if __name__ == "__main__":
    with wp.ScopedDevice("cpu"):
        example = Example()
        for it in range(4):
            loss = example.step()
            if it == 0:
                print(f"loss0 = {loss}")
            print(f"iter {it}: loss = {loss:.6f}")
