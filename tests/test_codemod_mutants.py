"""The codemods on the mutation benchmark's planted bugs in real programs (bench/mutants), given the
finding by hand where ``check`` does not report it yet (issue 10: when the detections of WF201 via
``fem.integrate``, WF501 and WF502 land, their codemods must fix these mutants).

Each mutant is rebuilt from the installed Warp / newton example by its operator; the fix must give
back the unmutated program byte for byte (the benchmark's recorder shows that program's gradients).
"""

from __future__ import annotations

import pytest

from bench.mutants.operators import BY_NAME as OPERATORS
from bench.mutants.programs import BY_NAME as PROGRAMS
from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.fixes import compute_edits

# (program, operator, site, finding data): the kept mutants of the last benchmark run
CASES = [
    ("elastic_shape", "drop-requires-grad", 2, {}),
    ("navier_stokes", "drop-requires-grad", 1, {}),
    ("elastic_shape", "retain-grad", 1, {}),
    ("navier_stokes", "retain-grad", 0, {}),
    ("drone", "duplicate-launch", 1, {}),
    ("elastic_shape", "duplicate-launch", 1, {}),
    ("spring_cage", "list-alias", 0, {"repeat": True}),
    ("navier_stokes", "list-alias", 0, {"repeat": True}),
]


@pytest.mark.slow  # libcst over five large real programs: ~1 min on the shared machine
@pytest.mark.parametrize(("program", "operator", "site", "data"), CASES,
                         ids=[f"{p}-{o}-{s}" for p, o, s, _ in CASES])
def test_codemod_restores_the_unmutated_program(program: str, operator: str, site: int, data: dict) -> None:
    prog, op = PROGRAMS[program], OPERATORS[operator]
    if not prog.source.exists():
        pytest.skip(f"{prog.source} is not installed")
    original = prog.source.read_text(encoding="utf-8")
    mutant = op.mutate(original, site)
    assert mutant is not None and mutant.code != original
    finding = Finding(op.rule, "planted", Severity.ERROR, Span(prog.file, mutant.line, 1, mutant.line, 1),
                      "given by hand", Fix(FixSafety.SAFE, ""), {"taped": True, **data})
    result = compute_edits({prog.file: mutant.code}, [finding])
    assert not result.skipped, result.skipped
    assert result.new_sources[prog.file] == original


# (program, the rotated list): the benchmark's ping-pong mutants rebuild a state list as a rotation of its slots
PING_PONG = [("ball", "self.states"), ("spring_cage", "self.states"), ("cloth", "self.states"),
             ("navier_stokes", "self.omega_timesteps")]


@pytest.mark.slow  # libcst over large real programs
@pytest.mark.parametrize(("program", "base"), PING_PONG, ids=[p for p, _ in PING_PONG])
def test_rotated_state_list_gets_fresh_slots_built_like_the_list(program: str, base: str) -> None:
    """WF104 on ``X = [X[0]] + [X[1 + i % 2] for i in ...]``: each rotated slot is the constructor call that
    built the list (``self.model.state()``, ``wp.zeros(...)``), once per slot, and nothing else changes."""
    prog, op = PROGRAMS[program], OPERATORS["ping-pong"]
    if not prog.source.exists():
        pytest.skip(f"{prog.source} is not installed")
    original = prog.source.read_text(encoding="utf-8")
    mutant = op.mutate(original, 0)
    assert mutant is not None
    [built] = [line for line in original.splitlines() if line.strip().startswith(f"{base} = [")]
    make = built.split("= [", 1)[1].rsplit(" for _ in", 1)[0]
    rotation = f"[{base}[1 + i % 2] for i in range(len({base}) - 1)]"
    assert rotation in mutant.code
    finding = Finding("WF104", "ping-pong", Severity.ERROR, Span(prog.file, mutant.line, 1, mutant.line, 1),
                      "given by hand", Fix(FixSafety.SAFE, ""), {"taped": True, "arg": f"{base}[t + 1]"})
    result = compute_edits({prog.file: mutant.code}, [finding])
    assert not result.skipped, result.skipped
    assert result.new_sources[prog.file] == mutant.code.replace(
        rotation, f"[{make} for i in range(len({base}) - 1)]")
