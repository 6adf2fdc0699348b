"""Bola toss (newton particles + springs): optimise the launch velocity and
spin of a three-ball bola so that the lead ball passes through a target."""

import numpy as np
import warp as wp
import warp.optim

import newton

wp.config.log_level = wp.LOG_WARNING
wp.set_device("cpu")

FRAMES = 40
DT = 0.01


@wp.kernel
def set_launch_velocity(
    q: wp.array(dtype=wp.vec3),
    v0: wp.array(dtype=wp.vec3),
    spin: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    com = (q[0] + q[1] + q[2]) / 3.0
    qd[i] = v0[0] + wp.cross(spin[0], q[i] - com)


@wp.kernel
def ball_target_loss(q: wp.array(dtype=wp.vec3), ball: int, target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[ball] - target
    loss[0] = wp.dot(d, d)


def build_bola():
    builder = newton.ModelBuilder()
    builder.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0)
    builder.add_particle((0.3, 0.0, 1.0), (0.0, 0.0, 0.0), 0.5)
    builder.add_particle((0.15, 0.26, 1.0), (0.0, 0.0, 0.0), 0.5)
    for a, b in [(0, 1), (1, 2), (2, 0)]:
        builder.add_spring(a, b, 200.0, 0.5, 0)
    return builder.finalize(requires_grad=True)


def simulate(solver, states, control, v0, spin):
    wp.launch(set_launch_velocity, dim=3, inputs=[states[0].particle_q, v0, spin], outputs=[states[0].particle_qd])
    for t in range(FRAMES):
        states[t].clear_forces()
        solver.step(states[t], states[t + 1], control, None, DT)
    return states[FRAMES]


if __name__ == "__main__":
    model = build_bola()
    solver = newton.solvers.SolverSemiImplicit(model)
    control = model.control()
    states = [model.state()] * (FRAMES + 1)

    v0 = wp.array([wp.vec3(2.0, 0.0, 2.0)], dtype=wp.vec3, requires_grad=True)
    spin = wp.array([wp.vec3(0.0, 0.0, 6.0)], dtype=wp.vec3, requires_grad=True)
    target = wp.vec3(1.0, 0.3, 1.2)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    opt = warp.optim.SGD([v0, spin], lr=0.2)

    for it in range(4):
        tape = wp.Tape()
        with tape:
            final = simulate(solver, states, control, v0, spin)
            wp.launch(ball_target_loss, dim=1, inputs=[final.particle_q, 0, target], outputs=[loss])
        tape.backward(loss)
        print(f"loss {it} {loss.numpy()[0]:.9g}")
        if it == 0:
            print("grad", "v0", np.array2string(v0.grad.numpy().ravel()[:8], precision=9))
            print("grad", "spin", np.array2string(spin.grad.numpy().ravel()[:8], precision=9))
        opt.step([v0.grad, spin.grad])
        tape.zero()
