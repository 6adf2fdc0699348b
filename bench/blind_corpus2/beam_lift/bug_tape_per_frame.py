# Cantilever lift (newton FEM tetrahedra, SolverSemiImplicit).
#
# A soft cantilever beam is clamped at its left face and sags under gravity.
# We look for a constant tip load and a global stiffness scale (log-space) so
# that the tip follows a target height over the second half of the motion.
# Both are trained with warp.optim.SGD through the whole taped rollout.
#
#   python ok.py

from dataclasses import dataclass, field

import numpy as np
import warp as wp
import warp.optim

import newton

FPS = 60
SUBSTEPS = 10
FRAMES = 24
DT = 1.0 / (FPS * SUBSTEPS)


@wp.kernel
def scale_materials(
    base: wp.array2d(dtype=float),
    log_scale: wp.array(dtype=float),
    materials: wp.array2d(dtype=float),
):
    i = wp.tid()
    s = wp.exp(log_scale[0])
    materials[i, 0] = base[i, 0] * s  # k_mu
    materials[i, 1] = base[i, 1] * s  # k_lambda
    materials[i, 2] = base[i, 2]  # k_damp


@wp.kernel
def apply_tip_load(load: wp.array(dtype=wp.vec3), tip_ids: wp.array(dtype=int), particle_f: wp.array(dtype=wp.vec3)):
    k = wp.tid()
    wp.atomic_add(particle_f, tip_ids[k], load[0] / float(tip_ids.shape[0]))


@wp.kernel
def tip_centroid(q: wp.array(dtype=wp.vec3), tip_ids: wp.array(dtype=int), tip: wp.array(dtype=wp.vec3)):
    k = wp.tid()
    wp.atomic_add(tip, 0, q[tip_ids[k]] / float(tip_ids.shape[0]))


@wp.kernel
def tracking_loss(tip: wp.array(dtype=wp.vec3), target: wp.vec3, weight: float, loss: wp.array(dtype=float)):
    d = tip[0] - target
    wp.atomic_add(loss, 0, weight * wp.dot(d, d))


@wp.kernel
def load_penalty(load: wp.array(dtype=wp.vec3), weight: float, loss: wp.array(dtype=float)):
    f = load[0]
    wp.atomic_add(loss, 0, weight * wp.dot(f, f))


@dataclass
class Scene:
    model: newton.Model
    solver: newton.solvers.SolverSemiImplicit
    control: newton.Control
    tip_ids: wp.array
    base_materials: wp.array
    states: list = field(default_factory=list)
    tips: list = field(default_factory=list)


def build_scene():
    builder = newton.ModelBuilder(up_axis=newton.Axis.Z)
    builder.add_soft_grid(
        pos=wp.vec3(0.0, 0.0, 1.0),
        rot=wp.quat_identity(),
        vel=wp.vec3(0.0, 0.0, 0.0),
        dim_x=6,
        dim_y=1,
        dim_z=1,
        cell_x=0.1,
        cell_y=0.1,
        cell_z=0.1,
        density=20.0,
        k_mu=2.0e4,
        k_lambda=4.0e4,
        k_damp=5.0,
        fix_left=True,
    )
    model = builder.finalize(requires_grad=True)
    model.particle_grid = None

    q = model.particle_q.numpy()
    tip_ids = wp.array(np.flatnonzero(q[:, 0] > q[:, 0].max() - 1.0e-4).astype(np.int32), dtype=int)

    scene = Scene(
        model=model,
        solver=newton.solvers.SolverSemiImplicit(model, enable_tri_contact=False),
        control=model.control(),
        tip_ids=tip_ids,
        base_materials=wp.clone(model.tet_materials, requires_grad=False),
    )
    scene.states = [model.state() for _ in range(FRAMES * SUBSTEPS + 1)]
    scene.tips = [wp.zeros(1, dtype=wp.vec3, requires_grad=True) for _ in range(FRAMES)]
    return scene


def simulate_frame(scene, frame, load):
    for s in range(SUBSTEPS):
        t = frame * SUBSTEPS + s
        state_in, state_out = scene.states[t], scene.states[t + 1]
        state_in.clear_forces()
        wp.launch(apply_tip_load, scene.tip_ids.shape[0], inputs=[load, scene.tip_ids], outputs=[state_in.particle_f])
        scene.solver.step(state_in, state_out, scene.control, None, DT)


def frame_cost(scene, frame, target, loss):
    tip = scene.tips[frame]
    tip.zero_()
    wp.launch(tip_centroid, scene.tip_ids.shape[0], inputs=[scene.states[(frame + 1) * SUBSTEPS].particle_q, scene.tip_ids], outputs=[tip])
    if frame >= FRAMES // 2:
        wp.launch(tracking_loss, 1, inputs=[tip, target, 1.0 / (FRAMES - FRAMES // 2)], outputs=[loss])


def objective(scene, load, log_scale, target, loss):
    """Backpropagates frame by frame, so only one frame's launches are held at a time."""
    model = scene.model
    for frame in range(FRAMES):
        tape = wp.Tape()
        with tape:
            if frame == 0:
                wp.launch(scale_materials, model.tet_count, inputs=[scene.base_materials, log_scale], outputs=[model.tet_materials])
            simulate_frame(scene, frame, load)
            frame_cost(scene, frame, target, loss)
            if frame == FRAMES - 1:
                wp.launch(load_penalty, 1, inputs=[load, 1.0e-3], outputs=[loss])
        tape.backward(loss)


def fmt(a):
    return "[" + ", ".join("%.9g" % x for x in np.asarray(a).ravel()) + "]"


def main(iterations=5):
    scene = build_scene()
    target = wp.vec3(0.6, 0.05, 1.0)

    load = wp.array([wp.vec3(0.0, 0.0, 1.0)], dtype=wp.vec3, requires_grad=True)
    log_scale = wp.array([0.3], dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    optimizer = warp.optim.SGD([load, log_scale], lr=5.0)
    tape = wp.Tape()

    for it in range(iterations):
        load.grad.zero_()
        log_scale.grad.zero_()
        loss.zero_()
        objective(scene, load, log_scale, target, loss)

        print("loss %d %.9g" % (it, loss.numpy()[0]))
        if it == 0:
            print("grad load", fmt(load.grad.numpy()))
            print("grad log_scale", fmt(log_scale.grad.numpy()))

        optimizer.step([load.grad, log_scale.grad])

    return load, log_scale


if __name__ == "__main__":
    wp.config.quiet = True
    wp.set_device("cpu")
    main()
