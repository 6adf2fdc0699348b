"""Library effect summaries, runner callbacks and the taped flag, on installed packages' real source.

The newton cases check copies of newton's own diffsim examples with one planted bug each; they run
``check`` only (no Warp program is executed)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from warpfix.engine import check_sources, parse_file, run_rules
from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model import build_project
from warpfix.model.library import LibraryIndex
from warpfix.model.library_summary import parse_path

HAS_NEWTON = importlib.util.find_spec("newton") is not None
needs_newton = pytest.mark.skipif(not HAS_NEWTON, reason="newton is not installed")


def _example(name: str) -> str:
    spec = importlib.util.find_spec("newton")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "examples" / "diffsim" / f"example_diffsim_{name}.py"
    return path.read_text(encoding="utf-8")


def _check(tmp_path: Path, files: dict[str, str], index: LibraryIndex) -> list[Finding]:
    parsed = {}
    for rel, text in files.items():
        src, err = parse_file(rel, text)
        assert src is not None, err
        parsed[rel] = src
    return run_rules(build_project(parsed, library=index))


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


@pytest.fixture
def index(tmp_path: Path) -> LibraryIndex:
    return LibraryIndex(cache_dir=str(tmp_path / "summaries"))


@needs_newton
def test_solver_step_reads_state_in_and_writes_state_out(index: LibraryIndex) -> None:
    from warpfix.model.host import library_interpreter

    hit = index.resolve("newton.solvers.SolverSemiImplicit")
    assert hit is not None and hit[0] == "class"
    found = library_interpreter(index).find_method((hit[1], hit[2]), "step")  # type: ignore[arg-type]
    assert found is not None
    summary = index.summary(found[0], found[1], "SolverSemiImplicit.step", is_method=True)
    assert summary is not None and summary.params[:3] == ["self", "state_in", "state_out"]
    written: set[str] = set()
    read: set[str] = set()
    for op in summary.ops:
        kernel = index.kernel(*op.kernel) if op.kernel else None
        for param, path in op.binding.items():
            facts = kernel.params[param] if kernel else None
            if facts is not None and facts.written:
                written.add(path)
            if facts is not None and facts.read:
                read.add(path)
    assert "state_out.particle_q" in written and "state_out.body_q" in written
    assert "state_in.particle_q" in read
    # the caller's control, not the model's default that `if control is None:` builds in its place
    assert "control.tet_activations" in read
    assert not any(p.startswith("state_in.particle_q") for p in written)
    # the constructor binds the model it is given
    init = library_interpreter(index).find_method((hit[1], hit[2]), "__init__")  # type: ignore[arg-type]
    assert init is not None
    assert index.summary(init[0], init[1], "SolverSemiImplicit.__init__", is_method=True).binds["model"] == "model"


@needs_newton
def test_summaries_are_cached_on_disk(tmp_path: Path, index: LibraryIndex) -> None:
    hit = index.resolve("newton.examples.run")
    assert hit is not None and hit[0] == "def"
    first = index.summary(hit[1], hit[2], "newton.examples.run", is_method=False)  # type: ignore[arg-type]
    assert first is not None and any(op.kind == "callback" and op.method == "step" and op.in_loop for op in first.ops)
    stored = [p for p in (tmp_path / "summaries").rglob("*.json")]
    assert stored and all(p.parent.name.startswith("newton-") for p in stored)
    again = LibraryIndex(cache_dir=str(tmp_path / "summaries"))
    hit2 = again.resolve("newton.examples.run")
    assert hit2 is not None
    assert again._load(hit2[1].path, hit2[2].lineno) == first  # type: ignore[union-attr]


@needs_newton
def test_summary_cache_key_follows_the_host_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Summaries are derived by the host interpreter (model/host/): editing it must invalidate them."""
    from warpfix.model import library

    fingerprint = library._model_fingerprint.__wrapped__  # uncached: computed once per process otherwise
    before = fingerprint()
    real_stat = os.stat
    touched = os.path.realpath(os.path.join(os.path.dirname(library.__file__), "host", "calls.py"))

    def stat(path: str, *args: object, **kwargs: object) -> os.stat_result | SimpleNamespace:
        st = real_stat(path, *args, **kwargs)  # type: ignore[arg-type]
        if isinstance(path, str) and os.path.realpath(path) == touched:  # edited a nanosecond later
            return SimpleNamespace(st_mtime_ns=st.st_mtime_ns + 1, st_size=st.st_size)
        return st

    monkeypatch.setattr(library.os, "stat", stat)
    assert fingerprint() != before


def test_unmodified_example_has_no_error(tmp_path: Path, index: LibraryIndex) -> None:
    findings = _check(tmp_path, {"example.py": _example("spring_cage")}, index)
    assert [f for f in findings if f.severity == Severity.ERROR] == []


@needs_newton
@pytest.mark.parametrize(
    ("old", "new", "rule", "at"),
    [
        ("self.solver.step(self.states[t], self.states[t + 1]", "self.solver.step(self.states[t], self.states[t]",
         "WF104", "self.solver.step(self.states[t], self.states[t]"),
        ("self.states = [self.model.state() for _ in range(self.sim_steps * self.sim_substeps + 1)]",
         "self.states = [self.model.state()] * (self.sim_steps * self.sim_substeps + 1)",
         "WF103", "self.states = [self.model.state()] *"),
        ("        self.tape.zero()\n", "", "WF301", None),
    ],
    ids=["aliased-states", "list-repeat", "missing-zero"],
)
def test_planted_bug_in_newton_example(tmp_path: Path, index: LibraryIndex, old: str, new: str, rule: str,
                                       at: str | None) -> None:
    text = _example("spring_cage")
    assert old in text
    mutant = text.replace(old, new, 1)
    findings = _check(tmp_path, {"example.py": mutant}, index)
    errors = [(f.rule, f.line) for f in findings if f.severity == Severity.ERROR]
    if at is None:
        assert any(r == rule for r, _ in errors), errors
    else:
        assert (rule, _line_of(mutant, at)) in errors, errors


@needs_newton
@pytest.mark.parametrize("call", ["self.model.state()", "self.model.state(requires_grad=True)"])
def test_a_list_of_one_library_state_is_fixable_with_or_without_arguments(
        tmp_path: Path, index: LibraryIndex, call: str) -> None:
    """``[self.model.state(requires_grad=True)] * n``: the slot's arrays are labelled by the callee
    (``self.model.state().particle_q``), not by the call's text with its arguments; both are one fresh state."""
    text = _example("spring_cage")
    old = "self.states = [self.model.state() for _ in range(self.sim_steps * self.sim_substeps + 1)]"
    assert old in text
    mutant = text.replace(old, f"self.states = [{call}] * (self.sim_steps * self.sim_substeps + 1)", 1)
    found = [f for f in _check(tmp_path, {"example.py": mutant}, index) if f.rule == "WF103"]
    assert [(f.line, f.fix.safety) for f in found] == [(_line_of(mutant, "self.states = ["), FixSafety.SAFE)]


_KERNELS = """
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), s: float):
    i = wp.tid()
    x[i] *= s


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])


x = wp.ones(4, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""


def test_taped_flag_and_untaped_error_is_a_warning() -> None:
    untaped = _KERNELS + "wp.launch(scale, dim=4, inputs=[x, 2.0])\n"
    taped = _KERNELS + (
        "tape = wp.Tape()\nwith tape:\n    wp.launch(scale, dim=4, inputs=[x, 2.0])\n"
        "    wp.launch(total, dim=4, inputs=[x, loss])\ntape.backward(loss)\n"
    )
    (f_untaped,) = [f for f in check_sources({"main.py": untaped}).findings if f.rule == "WF401"]
    assert f_untaped.data["taped"] is False and f_untaped.severity == Severity.WARNING
    (f_taped,) = [f for f in check_sources({"main.py": taped}).findings if f.rule == "WF401"]
    assert f_taped.data["taped"] is True and f_taped.severity == Severity.ERROR


def test_every_finding_says_whether_it_is_taped() -> None:
    found = check_sources({"main.py": _KERNELS + "tape = wp.Tape()\nwith tape:\n"
                           "    wp.launch(scale, dim=4, inputs=[x, 2.0])\ntape.backward(loss)\n"}).findings
    assert found and all(isinstance(f.data.get("taped"), bool) for f in found)


def test_list_repeat_makes_one_state_object() -> None:
    code = """
import warp as wp


@wp.kernel
def step(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i])


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])


class State:
    def __init__(self):
        self.q = wp.zeros(4, dtype=float, requires_grad=True)


loss = wp.zeros(1, dtype=float, requires_grad=True)
states = [State()] * 4
tape = wp.Tape()
with tape:
    for t in range(3):
        wp.launch(step, dim=4, inputs=[states[t].q], outputs=[states[t + 1].q])
    wp.launch(total, dim=4, inputs=[states[3].q, loss])
tape.backward(loss)
"""
    found = [(f.rule, f.line, f.fix.safety.value) for f in check_sources({"main.py": code}).findings]
    line = code.splitlines().index("states = [State()] * 4") + 1
    assert ("WF103", line, "safe") in found, found  # State() only allocates: one call per slot is the fix
    fixed = code.replace("[State()] * 4", "[State() for _ in range(4)]")
    assert not [f for f in check_sources({"main.py": fixed}).findings if f.rule in ("WF103", "WF104")]


def test_runner_helper_calls_a_bound_method_in_a_loop() -> None:
    code = _KERNELS + """

class Trainer:
    def __init__(self):
        self.tape = wp.Tape()

    def step(self):
        with self.tape:
            wp.launch(total, dim=4, inputs=[x, loss])
        self.tape.backward(loss)
        x.assign(x.numpy() - 0.1 * x.grad.numpy())


def run(n, fn):
    for _ in range(n):
        fn()


run(10, Trainer().step)
"""
    rules = {f.rule for f in check_sources({"main.py": code}).findings}
    assert "WF301" in rules


def test_no_library_index_keeps_calls_opaque() -> None:
    empty = LibraryIndex(site_dirs=[], cache_dir="")
    assert not empty.has_package("newton") and empty.resolve("newton.solvers.SolverSemiImplicit") is None


def test_parse_path_is_shared_and_immutable() -> None:
    """parse_path is cached (summary replay parses the same paths ~200k times on newton's examples):
    callers share one result, so it must be a tuple no caller can change under the others."""
    first = parse_path("a.b[0].c")
    assert first == ("a", (("attr", "b"), ("item", "0"), ("attr", "c")))
    assert parse_path("a.b[0].c") is first
    assert isinstance(first[1], tuple)


def test_a_summary_keeps_every_field_through_its_disk_form() -> None:
    """The disk cache stores summaries as JSON: what a call returns survives the round trip."""
    from warpfix.model.library_summary import KNOWN_EFFECTS, Summary

    for known in KNOWN_EFFECTS.values():
        assert Summary.from_json(json.loads(json.dumps(known.to_json()))) == known
