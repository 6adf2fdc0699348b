"""Independent FD check of Warp's fluid_checkpoint example: its checkpointed gradient against the real program.

Runs the example's own forward() and backward() (no warpfix replay involved) and compares the gradient of the
loss in the initial velocities (vx, vy), along its own direction, with central and one-sided differences of the
loss, at the program's first evaluation point (the velocities start at zero, so every semi-Lagrangian lookup
lands exactly on a grid node of the bilinear interpolant, a kink) and at base points moved slightly off it.
Usage: python bench/fluid_kink.py [--frames 8] [--pressure-iterations 10] [--custom-backward]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._kink import load_example, print_slopes  # noqa: E402
from bench.mutants.programs import SITE  # noqa: E402

OPTIM = SITE / "warp" / "examples" / "optim"


class Runner:
    """The example's forward (and backward) from the start state it was built with, initial velocities given."""

    def __init__(self, ex) -> None:
        self.ex = ex
        self.start = [a.numpy().copy() for a in self._state()]

    def _state(self) -> list:
        ex = self.ex
        return [ex.vx_arrays[0], ex.vy_arrays[0], ex.density_arrays[0], ex.pressure_arrays[0]]

    def loss(self, vx: np.ndarray, vy: np.ndarray, backward: bool) -> tuple[float, np.ndarray | None]:
        for arr, value in zip(self._state(), [vx, vy, *self.start[2:]], strict=True):
            arr.assign(value)
        self.ex.forward()
        value = float(self.ex.loss.numpy()[0])
        if not backward:
            return value, None
        self.ex.backward()
        grad = np.concatenate([self.ex.vx_arrays[0].grad.numpy().ravel(), self.ex.vy_arrays[0].grad.numpy().ravel()])
        self.ex.tape.zero()
        return value, grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--pressure-iterations", type=int, default=10)
    parser.add_argument("--segment-size", type=int, default=4)
    parser.add_argument("--custom-backward", action="store_true", help="the custom-backward variant of the example")
    args = parser.parse_args()
    wp.set_device("cpu")
    name = "example_fluid_checkpoint_custom_backward" if args.custom_backward else "example_fluid_checkpoint"
    prog = load_example(OPTIM / f"{name}.py", name)
    ex = prog.Example(sim_steps=args.frames, pressure_iterations=args.pressure_iterations,
                      segment_size=args.segment_size)  # fmt: skip
    run = Runner(ex)
    shape = run.start[0].shape
    rng = np.random.default_rng(0)
    for offset in (0.0, 1e-2, 1e-1):
        v0 = (offset * rng.uniform(0.2, 1.0, (2, *shape)) * rng.choice([-1, 1], (2, *shape))).astype(np.float32)
        print_slopes(lambda v, backward: run.loss(v[0], v[1], backward), v0, (1e-1, 1e-2, 1e-3),
                     f"base |v|~{offset:g}")  # fmt: skip


if __name__ == "__main__":
    main()
