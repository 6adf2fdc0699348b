"""Host hazards through a launch under an undecided ``if`` (issue 9, precision).

A function the taped block calls launches a kernel only under ``if model.mimic_count:``, which the
model cannot decide (newton's solvers: ``if model.joint_mimic_count:``). Kernel findings already
ignore such launches when deciding "taped"; a host hazard whose read or overwrite is one of them
may not happen either, so it is a warning with no automatic edit. Before, newton's
``tests/featherstone/test_tile_gemm.py:54`` was a WF104 error through ``eval_joint_mimic``.

Launches replayed from a library summary are "conditional" under any ``if`` of the library
(``if model.particle_count:``), which nearly all are: that flag alone would have turned real
planted bugs (newton ball ping-pong, spring_cage / cloth ``[state] * n``) into warnings. What
makes test_tile_gemm's hazards no user bug is that they lie inside the library's own chaining:
featherstone's ``step`` rewrites in place ``state_in.joint_q`` / ``state_in.body_q`` of the state
the previous step wrote, with the user's states all distinct (FD agrees with the tape gradient on
all 24 DOFs of that test's model, worst relative error 8.9e-4)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from warpfix.apply import plan_fixes
from warpfix.engine import check_paths, check_sources

PROGRAM = '''\
import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def loss_k(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


def step(model, a, b):
{first}
{second}


model = load_model()
x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    step(model, x, y)
    wp.launch(loss_k, dim=4, inputs=[x], outputs=[loss])
tape.backward(loss)
'''
READ = "    wp.launch(square, dim=4, inputs=[a], outputs=[b])"
OVERWRITE = "    wp.launch(square, dim=4, inputs=[b], outputs=[a])"


def _under_if(line: str) -> str:
    return "    if model.mimic_count:\n    " + line


CASES = {
    "overwrite under if": (READ, _under_if(OVERWRITE)),
    "read under if": (_under_if(READ), OVERWRITE),
}


def _hazards(source: str) -> list[tuple[str, str, bool]]:
    result = check_sources({"prog.py": source})
    assert not result.errors, result.errors
    return [(f.rule, f.severity.value, f.data["taped"]) for f in result.findings if f.rule.startswith("WF10")]


def test_an_unconditional_ping_pong_is_a_taped_error() -> None:
    assert _hazards(PROGRAM.format(first=READ, second=OVERWRITE)) == [("WF104", "error", True)]


@pytest.mark.parametrize("case", list(CASES))
def test_a_hazard_through_an_undecided_launch_is_an_untaped_warning(case: str) -> None:
    first, second = CASES[case]
    assert _hazards(PROGRAM.format(first=first, second=second)) == [("WF104", "warning", False)]


@pytest.mark.parametrize("conditional", [False, True])
def test_apply_edits_only_the_unconditional_hazard(tmp_path: Path, conditional: bool) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM.format(first=READ, second=_under_if(OVERWRITE) if conditional else OVERWRITE))
    planned = plan_fixes([str(prog)])
    assert [e.finding.rule for e in planned.edits if e.kept] == ([] if conditional else ["WF104"])
    assert bool(planned.changed) is not conditional


@pytest.mark.slow  # parses newton for its library summaries (~20 s)
def test_newtons_tile_gemm_test_is_no_error(tmp_path: Path) -> None:
    spec = importlib.util.find_spec("newton")
    if spec is None or spec.origin is None:
        pytest.skip("newton is not installed")
    test_file = Path(spec.origin).parent / "tests" / "featherstone" / "test_tile_gemm.py"
    if not test_file.exists():
        pytest.skip("newton has no test_tile_gemm.py")
    copy = tmp_path / "test_tile_gemm.py"
    shutil.copy(test_file, copy)
    result = check_paths([str(copy)], use_cache=False)
    assert [f for f in result.findings if f.severity.value == "error"] == []
    wf104 = [f for f in result.findings if f.rule == "WF104"]
    assert wf104 and all(f.data.get("library_in_place") and not f.data["taped"] for f in wf104)


@pytest.mark.slow  # parses newton for its library summaries
@pytest.mark.parametrize(
    ("program", "operator", "rule"),
    [("ball", "ping-pong", "WF104"), ("spring_cage", "list-alias", "WF103"), ("cloth", "list-alias", "WF103")],
)
def test_planted_aliasing_through_a_solver_stays_an_error(tmp_path: Path, program: str, operator: str,
                                                          rule: str) -> None:
    """The kept mutants of bench/mutate.py whose first gradient changes: the library's launches
    are conditional in its summary, the user's aliasing is what overwrites."""
    if importlib.util.find_spec("newton") is None:
        pytest.skip("newton is not installed")
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.mutants.operators import BY_NAME
    from bench.mutants.programs import PROGRAMS

    prog = next(p for p in PROGRAMS if p.name == program)
    mutant = BY_NAME[operator].mutate(prog.source.read_text(), 0)
    assert mutant is not None
    path = tmp_path / prog.file
    path.write_text(mutant.code)
    result = check_paths([str(path)], use_cache=False, select=["WF1"])
    errors = [(f.rule, f.line) for f in result.findings if f.severity.value == "error" and f.data["taped"]]
    assert errors and {r for r, _ in errors} == {rule}


# WF303: the only read the tape may record of ``x`` is a launch under an undecided ``if`` of a method
# the taped block calls (newton's ``CollisionPipeline.collide``: ``if self.deterministic and ...:``
# sorts its contacts, reading its sort buffers, which a second ``collide`` before the backward
# rewrites; newton/tests/test_deformable_rigid_regressions.py:506 was a WF303 error once newton's
# tests resolved ``newton`` to the project, not to the installed copy's summaries).
WRITE_BEFORE_BACKWARD = '''\
import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


class Pipeline:
    def __init__(self, sort):
        self.sort = sort

    def run(self, x, y, loss):
{read}
        wp.launch(total, 4, inputs=[y, loss])


def train(sort):
    pipe = Pipeline(sort)
    x = wp.ones(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        pipe.run(x, y, loss)
    x.fill_(3.0)
    tape.backward(loss)
'''
SQUARE = "        wp.launch(square, 4, inputs=[x, y])"


@pytest.mark.parametrize("read, expected", [
    (SQUARE, ("WF303", "error", True)),
    ("        if self.sort:\n    " + SQUARE, ("WF303", "warning", False)),
    # a read that surely happens decides, whichever read came first
    ("        if self.sort:\n    " + SQUARE + "\n" + SQUARE, ("WF303", "error", True)),
])
def test_write_before_backward_of_an_undecided_read_is_an_untaped_warning(read: str,
                                                                          expected: tuple[str, str, bool]) -> None:
    result = check_sources({"prog.py": WRITE_BEFORE_BACKWARD.format(read=read)}, select=["WF303"])
    assert [(f.rule, f.severity.value, f.data["taped"]) for f in result.findings] == [expected]
