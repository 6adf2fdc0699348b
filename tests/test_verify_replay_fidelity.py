"""The FD replay's fidelity to the program: the put-back check on recorded operations made by hand
(warpfix.verify.replay_holds.put_back_downstream), and programs whose replays once missed what the program did."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from warpfix.verify import run_verify
from warpfix.verify.records import ArrayInfo, Op, ReplayPlan
from warpfix.verify.replay_holds import held_constant, put_back_downstream

PROGRAMS = Path(__file__).resolve().parent / "verify_programs"


def _info(order: int, first: int, size: int = 4, snap: float = 1.0) -> ArrayInfo:
    held = SimpleNamespace(numpy=lambda: np.full(size, snap))  # the contents a replay puts back
    return ArrayInfo(arr=None, order=order, snap=held, name=f"a{order}", hash=0, span=("cpu", first, first + size))


def test_put_back_memory_holding_values_from_the_leaf_makes_the_replay_no_evidence() -> None:
    leaf, tmp, late, const = _info(0, 0), _info(1, 100), _info(2, 100), _info(3, 300)
    ops = [
        Op(0, "launch", "launch of kernel assemble", "p.py", 1, None, lambda: None, [leaf], [tmp]),
        Op(1, "launch", "launch of kernel fill", "p.py", 2, None, lambda: None, [const], [const]),
        Op(2, "launch", "launch of kernel solve", "p.py", 3, None, lambda: None, [late], [late]),
    ]
    # `late` lies over the memory `assemble` wrote from the leaf, and the replay puts it back at op 2
    plan = ReplayPlan(3, [leaf, tmp, late], {0: [leaf]}, resets={2: [late]})
    assert put_back_downstream(ops, plan, leaf) is late
    # a put-back over memory nothing computed from the leaf (a pooled buffer refilled with constants)
    plan = ReplayPlan(3, [leaf, tmp, const], {0: [leaf]}, resets={1: [const]})
    assert put_back_downstream(ops, plan, leaf) is None
    # zeros put back over memory the leaf's values were in: the program cleared a buffer lent again
    cleared = _info(4, 100, snap=0.0)
    plan = ReplayPlan(3, [leaf, tmp, cleared], {0: [leaf]}, resets={2: [cleared]})
    assert put_back_downstream(ops, plan, leaf) is None


def test_a_taped_read_of_a_no_gradient_array_computed_off_the_tape_from_the_leaf_is_found() -> None:
    # warp.fem's cantilever: the element energies come from an untaped solve of the filtered density and
    # enter the taped compliance-sensitivity loss as constants (an adjoint by hand)
    tape = object()
    leaf, density, energy, loss = _info(0, 0), _info(1, 100), _info(2, 200), _info(3, 300)
    energy.arr = SimpleNamespace(requires_grad=False)
    density.arr = SimpleNamespace(requires_grad=True)
    ops = [
        Op(0, "launch", "launch of kernel filter", "c.py", 1, tape, lambda: None, [leaf], [density]),
        Op(1, "launch", "launch of kernel energy", "c.py", 2, None, lambda: None, [density], [energy]),
        Op(2, "launch", "launch of kernel loss", "c.py", 3, tape, lambda: None, [density, energy], [loss]),
    ]
    plan = ReplayPlan(3, [leaf, density, energy, loss], {0: [leaf]})
    assert held_constant(ops, plan, leaf) == (energy, ops[1])
    # with a gradient (a kernel launched outside the tape by mistake) the disagreement stands as evidence
    energy.arr = SimpleNamespace(requires_grad=True)
    assert held_constant(ops, plan, leaf) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "program",
    [
        # warp.optim.linear.cg's dot products store their sums with wp.tile_store through a view: trusting
        # Warp's flags, the probe put the program's p.Ap back in every replay and the perturbed CG went NaN
        "cg_solve.py",
        # warp.sparse copies and zeroes the values array that owns a traced scalar_values view: untraced,
        # the replay held the projected stiffness matrix constant (a false WF901, AD/FD ratio -245)
        "sparse_solve.py",
    ],
)
def test_iterative_and_sparse_solves_replay_as_the_program_ran(program: str) -> None:
    report = run_verify([sys.executable, program], cwd=str(PROGRAMS), timeout=300)
    assert report.error is None, report.error
    assert [p.verdict for b in report.backwards for p in b.params] == ["pass", "pass"]
    assert not [f for f in report.findings if f.severity.value == "error"]


@pytest.mark.slow
def test_a_step_that_crosses_a_pole_leaves_the_smaller_steps_to_judge() -> None:
    # the largest rung makes the loss NaN at every sample: the sample used to be unreliable whatever the
    # smaller rungs showed
    report = run_verify([sys.executable, "log_barrier.py"], cwd=str(PROGRAMS), timeout=300)
    assert report.error is None, report.error
    assert [p.verdict for b in report.backwards for p in b.params] == ["pass", "pass"]
    assert any("non-finite value" in n for n in report.notes)
