"""Independent FD check of warp.fem's darcy_ls example: the tape's gradient against the real program.

Runs the example's own step() forward from its own state (no warpfix replay involved) and compares the
tape gradient along its own direction with central and one-sided differences of the loss, at the
program's base point (velocity zeroed, as step() does) and at base points moved slightly off it.
Usage: python bench/darcy_kink.py [--iters 2] [--resolution 12]
"""

from __future__ import annotations

import argparse

import numpy as np
import warp as wp
import warp.examples.fem.utils as fem_utils
import warp.fem as fem

from bench._kink import load_example, print_slopes
from bench.mutants.programs import SITE

EXAMPLE = SITE / "warp" / "examples" / "fem" / "example_darcy_ls_optimization.py"


def loss_and_grad(prog, ex, ls: np.ndarray, v: np.ndarray, backward: bool) -> tuple[float, np.ndarray | None]:
    """The forward of ex.step() with the level set and velocity given (tighter CG tolerance); no update."""
    ex._level_set_field.dof_values.assign(ls)
    p = ex._p_field.dof_values
    p.zero_()
    vel = ex._level_set_velocity_field.dof_values
    vel.assign(v)
    adv = fem.make_discrete_field(space=ex._ls_space)
    adv.dof_values.assign(ex._level_set_field.dof_values)
    adv.dof_values.requires_grad = True
    p_rhs = wp.empty(ex._p_space.node_count(), dtype=float, requires_grad=True)
    vals = {"smoothing": ex._smoothing, "simp": ex._simp, "k_min": ex._k_min}
    tape = wp.Tape()
    with tape:
        ex.advect_level_set(ex._level_set_field, fem.make_restriction(adv, domain=ex._p_test.domain),
                            ex._level_set_velocity_field, dt=1.0)  # fmt: skip
        fem.integrate(prog.diffusion_form, fields={"level_set": adv, "p": ex._p_field, "q": ex._p_test},
                      values={**vals, "scale": -1.0}, output=p_rhs)  # fmt: skip
    mat = fem.integrate(prog.diffusion_form, fields={"level_set": adv, "p": ex._p_trial, "q": ex._p_test},
                        values={**vals, "scale": 1.0}, output_dtype=float)  # fmt: skip
    fem.project_linear_system(
        mat, p_rhs, ex._bd_projector, ex._bd_prescribed_value, normalize_projector=False
    )
    fem_utils.bsr_cg(mat, b=p_rhs, x=p, quiet=True, tol=1e-10, max_iters=5000)

    def adjoint_solve():
        fem_utils.bsr_cg(mat, b=p.grad, x=p_rhs.grad, quiet=True, tol=1e-10, max_iters=5000)
        p_rhs.grad -= ex._bd_projector @ p_rhs.grad

    tape.record_func(adjoint_solve, arrays=(p_rhs, p))
    loss = wp.empty(shape=1, dtype=float, requires_grad=True)
    vol = wp.empty(shape=1, dtype=float, requires_grad=True)
    with tape:
        fem.integrate(prog.inflow_velocity, fields={"level_set": adv.trace(), "p": ex._p_field.trace()},
                      values=vals, domain=ex._inflow, output=loss)  # fmt: skip
        fem.integrate(prog.volume_form, fields={"level_set": adv}, values={"smoothing": ex._smoothing},
                      domain=ex._p_test.domain, output=vol)  # fmt: skip
        wp.launch(prog.combine_losses, dim=1, inputs=(loss, vol, ex._target_vol, 1000.0))
    value = float(loss.numpy()[0])
    if not backward:
        return value, None
    tape.backward(loss=loss)
    grad = vel.grad.numpy().copy()
    tape.zero()
    return value, grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=2)
    parser.add_argument("--resolution", type=int, default=12)
    args = parser.parse_args()
    wp.set_device("cpu")
    prog = load_example(EXAMPLE, "darcy_ls")
    # the example's command-line defaults (degree 1, dt 0.05, simp 3)
    ex = prog.Example(quiet=True, degree=1, resolution=args.resolution, dt=0.05, simp=3.0, k_min=0.0)
    rng = np.random.default_rng(0)
    for it in range(args.iters):
        ls = ex._level_set_field.dof_values.numpy().copy()
        shape = ex._level_set_velocity_field.dof_values.numpy().shape
        for offset in (0.0, 1e-3, 1e-2):
            v0 = (offset * rng.uniform(0.2, 1.0, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
            print_slopes(lambda v, backward, ls=ls: loss_and_grad(prog, ex, ls, v, backward), v0, (1e-3, 1e-4),
                         f"iter {it} base |v|~{offset:g}")  # fmt: skip
        ex._level_set_field.dof_values.assign(ls)
        ex.step()


if __name__ == "__main__":
    main()
