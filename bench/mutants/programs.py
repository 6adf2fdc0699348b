"""The real programs the mutation benchmark plants bugs in: differentiable examples nobody on the team wrote.

Each is copied from site-packages into a scratch folder and run there as a script with small
arguments on the CPU. Examples that need a package this environment lacks are listed with the
reason (they are skipped when their import fails at the baseline run).

Not here: Warp's tile examples (``example_tile_mlp`` runs on ``cuda:0`` only, hard-coded). Listed
but never kept: ``example_particle_repulsion`` records no tape (its baseline run is skipped,
"no backward ran"). The optim examples older Warp releases shipped
(bounce, cloth_throw, inverse_kinematics, trajectory, walker) are not in warp-lang 1.19.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import warp

SITE = Path(warp.__file__).resolve().parent.parent
# newton's null viewer counts rendered frames, and the examples render a whole trajectory at their
# first step and then only every few iterations: these frame counts give at least two iterations
NEWTON_FRAMES = {"ball": 38, "spring_cage": 32, "cloth": 122, "soft_body": 62, "drone": 4, "bear": 6}
# bear's default 300 frames of 80 substeps run past the 300 s timeout on the CPU; 4 frames (5 rendered
# per iteration) run two iterations in about 12 CPU seconds
NEWTON_ARGS = {"bear": ("--sim-steps", "4")}


@dataclass(frozen=True)
class Program:
    name: str
    source: Path
    args: tuple[str, ...]
    default: bool = True  # part of a run without --programs

    @property
    def file(self) -> str:
        return self.source.name


def _newton(name: str, default: bool = True) -> Program:
    flags = ("--viewer", "null", "--num-frames", str(NEWTON_FRAMES[name]), "--device", "cpu", *NEWTON_ARGS.get(name, ()))
    return Program(name, SITE / "newton" / "examples" / "diffsim" / f"example_diffsim_{name}.py", flags, default)


PROGRAMS: list[Program] = [
    _newton("ball"),
    _newton("spring_cage"),
    _newton("cloth", default=False),
    _newton("drone", default=False),
    _newton("soft_body", default=False),
    _newton("bear", default=False),  # needs pxr (usd-core)
    Program(
        "elastic_shape", SITE / "warp" / "examples" / "fem" / "example_elastic_shape_optimization.py",
        ("--device", "cpu", "--headless", "--num-iters", "4", "--resolution", "8"), default=False,
    ),
    Program(
        "darcy_ls", SITE / "warp" / "examples" / "fem" / "example_darcy_ls_optimization.py",
        ("--device", "cpu", "--headless", "--num-iters", "4", "--resolution", "12"), default=False,
    ),
    Program(
        "navier_stokes", SITE / "warp" / "examples" / "optim" / "example_navier_stokes_perturbation.py",
        ("--device", "cpu", "--headless", "--train-iters", "4", "--spin-up-steps", "5", "--lead-steps", "5"),
        default=False,
    ),
    Program(  # needs nlopt
        "cantilever", SITE / "warp" / "examples" / "fem" / "example_cantilever_topology_optimization.py",
        ("--device", "cpu", "--headless", "--max-evals", "4", "--nx", "8", "--ny", "4"), default=False,
    ),
    Program(  # needs Pillow (mutate.py --extra-path: a folder holding it)
        "fluid_checkpoint", SITE / "warp" / "examples" / "optim" / "example_fluid_checkpoint.py",
        ("--device", "cpu", "--headless", "--train-iters", "4", "--num-frames", "8", "--pressure-iterations", "10"),
        default=False,
    ),
    Program(  # needs Pillow; a custom backward (wp.Tape.record_func) over checkpointed segments
        "fluid_checkpoint_cb", SITE / "warp" / "examples" / "optim" / "example_fluid_checkpoint_custom_backward.py",
        ("--device", "cpu", "--headless", "--train-iters", "4", "--num-frames", "8", "--pressure-iterations", "10",
         "--segment-size", "4"),
        default=False,
    ),
    Program(  # no tape: skipped at its baseline run
        "particle_repulsion", SITE / "warp" / "examples" / "optim" / "example_particle_repulsion.py",
        ("--device", "cpu", "--headless", "--num-frames", "10"), default=False,
    ),
    Program(  # needs pxr (usd-core)
        "diffray", SITE / "warp" / "examples" / "optim" / "example_diffray.py",
        ("--device", "cpu", "--headless", "--train-iters", "4", "--height", "32"), default=False,
    ),
]

BY_NAME: dict[str, Program] = {p.name: p for p in PROGRAMS}
