"""Fit spring stiffnesses; `--bug` selects a gradient bug (none, overwrite, no-grad, adjoint)."""

import argparse

import numpy as np
import warp as wp

from springs import sim

N = 32
STEPS = 6


def rollout(k, target, bug):
    x = wp.array(np.linspace(-1.0, 1.0, N).astype(np.float32), requires_grad=True)
    v = wp.zeros(N, dtype=float, requires_grad=True)
    shared_force = wp.zeros(N, dtype=float, requires_grad=True)
    forces = sim.forces_bad_adjoint if bug == "adjoint" else sim.forces
    for _ in range(STEPS):
        if bug == "overwrite":
            f = shared_force  # one force buffer for every step: step n+1 overwrites what step n read
        else:
            f = wp.zeros(N, dtype=float, requires_grad=bug != "no-grad")
        wp.launch(forces, dim=N, inputs=[x, v, k], outputs=[f])
        x_new = wp.empty_like(x)
        v_new = wp.empty_like(v)
        wp.launch(sim.integrate, dim=N, inputs=[x, v, f], outputs=[x_new, v_new])
        x, v = x_new, v_new
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(sim.loss_kernel, dim=N, inputs=[x, target, loss])
    return loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", default="none", choices=["none", "overwrite", "no-grad", "adjoint"])
    parser.add_argument("--iters", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    k = wp.array(rng.uniform(1.0, 3.0, N).astype(np.float32), requires_grad=True)
    target = wp.array(rng.uniform(-0.3, 0.3, N).astype(np.float32))
    for it in range(args.iters):
        tape = wp.Tape()
        with tape:
            loss = rollout(k, target, args.bug)
        tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sim.sgd, dim=N, inputs=[k, k.grad, 0.05])
        tape.zero()


if __name__ == "__main__":
    main()
