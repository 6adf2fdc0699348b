"""The runtime WF201 check (warpfix/verify/cut_chain.py): an array the program allocated without
requires_grad, written on the tape from a parameter and read on the way to the loss, is reported at its
allocation, and routed to the WF201 codemod."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.mutants.operators import BY_NAME as OPERATORS
from bench.mutants.programs import BY_NAME as BENCH_PROGRAMS
from warpfix.fixes import compute_edits
from warpfix.verify import run_verify
from warpfix.verify.fixable import runtime_fixes

PROGRAMS = Path(__file__).parent / "verify_programs"
PROGRAM = "cut_chain.py"


def line_of(text: str) -> int:
    return next(i for i, line in enumerate((PROGRAMS / PROGRAM).read_text().splitlines(), 1) if text in line)


def cut_chains(*args: str):
    report = run_verify(["python", PROGRAM, *args], cwd=str(PROGRAMS), timeout=120.0)
    assert report.error is None, report.error
    return report, [f for f in report.findings if f.data.get("runtime") == "cut-chain"]


def test_an_intermediate_without_requires_grad_is_reported_at_its_allocation_and_fixed_there() -> None:
    report, [finding] = cut_chains("--bug")
    alloc = line_of("b = wp.zeros(N")
    assert (finding.rule, finding.severity.value, finding.path, finding.line) == ("WF201", "error", PROGRAM, alloc)
    assert finding.data["array"] == "b" and finding.data["classified_as"] == "WF201"
    assert f"{PROGRAM}:{line_of('inputs=[p], outputs=[b]')}" in finding.message  # the writer
    assert f"{PROGRAM}:{line_of('inputs=[b], outputs=[loss]')}" in finding.message  # the reader
    # `check` missed it: the runtime finding is offered as the WF201 fix, which edits the allocation
    path = str(PROGRAMS / PROGRAM)
    sources = {path: (PROGRAMS / PROGRAM).read_text()}
    [fix] = runtime_fixes(report.findings, str(PROGRAMS), sources, [])
    assert (fix.rule, fix.line) == ("WF201", alloc)
    edited = compute_edits(sources, [fix]).new_sources[path]
    assert "b = wp.zeros(N, dtype=float, requires_grad=True)" in edited


def test_a_chain_cut_before_a_copy_the_tape_leaves_off_is_reported() -> None:
    """navier_stokes's shape: `b` (no gradient) reaches the loss only through ``wp.copy(c, b)``, which Warp does
    not record because its source has no gradient; the check followed recorded operations only and saw no
    chain from the loss back to `b` (the bench's navier_stokes drop-requires-grad mutant had no runtime WF201)."""
    _, [finding] = cut_chains("--bug", "--copied")
    assert (finding.rule, finding.line, finding.data["array"]) == ("WF201", line_of("b = wp.zeros(N"), "b")
    assert f"wp.copy at {PROGRAM}:{line_of('    wp.copy(c, b)')} reads it" in finding.message


@pytest.mark.parametrize("args", [(), ("--detached",), ("--custom",), ("--copied",)],
                         ids=["correct", "detached-metric", "unrecorded-under-custom-adjoint", "copied-on"])
def test_a_full_chain_and_a_chain_that_never_reaches_the_loss_are_clean(args: tuple[str, ...]) -> None:
    """`--detached` computes a metric from p into buffers without gradients: they never reach the loss.
    `--custom` passes the chain through a scratch buffer without a gradient by launches the tape does not
    record, under a ``record_func`` adjoint: no recorded operation is cut (a false WF201 before)."""
    report, found = cut_chains(*args)
    assert found == []
    assert not [f for f in report.findings if f.severity.value == "error"]


@pytest.mark.slow  # two verify runs of Warp's navier_stokes example: ~2 min on the shared machine
@pytest.mark.parametrize("mutated", [True, False], ids=["stage-arrays-without-grad", "unmodified"])
def test_navier_stokes_stage_arrays_copied_on_without_a_gradient(tmp_path: Path, mutated: bool) -> None:
    """The benchmark's navier_stokes drop-requires-grad mutant (site 1: the per-stage omega arrays, copied on to
    the next step by ``wp.copy``) is reported at its allocation; the unmodified example has no cut chain."""
    prog = BENCH_PROGRAMS["navier_stokes"]
    if not prog.source.exists():
        pytest.skip(f"{prog.source} is not installed")
    source = prog.source.read_text(encoding="utf-8")
    mutant = OPERATORS["drop-requires-grad"].mutate(source, 1)
    assert mutant is not None and "stage_omega.append(wp.zeros((N_GRID, N_GRID), dtype=float))" in mutant.code
    (tmp_path / prog.source.name).write_text(mutant.code if mutated else source, encoding="utf-8")
    report = run_verify([sys.executable, prog.source.name, *prog.args], cwd=str(tmp_path), timeout=300.0)
    assert report.error is None, report.error
    found = [(f.rule, f.line) for f in report.findings if f.data.get("runtime") == "cut-chain"]
    assert found == ([("WF201", mutant.line)] if mutated else [])
