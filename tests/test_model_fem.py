"""warp.fem entry points in the host model: ``fem.integrate`` / ``fem.interpolate`` build their kernels at
run time, so their effects come from the hand-written table in ``warpfix/model/library.py`` (keyed by the
resolved definition). ``check`` only: no Warp program runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from warpfix.engine import parse_file, run_rules
from warpfix.finding import Finding, Severity
from warpfix.model import build_project
from warpfix.model.library import LibraryIndex

_HEAD = '''
import warp as wp
import warp.fem as fem


@fem.integrand
def load_form(s: fem.Sample, v: fem.Field, scale: wp.array(dtype=float)):
    return scale[0] * v(s)


@fem.integrand
def scaled(s: fem.Sample, u: fem.Field, scale: wp.array(dtype=float)):
    return scale[0] * u(s)


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    y[0] = 2.0 * x[0]


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])
'''

CLASS_STYLE = _HEAD + '''

class Trainer:
    def __init__(self):
        geo = fem.Grid2D(res=wp.vec2i(4))
        self.space = fem.make_polynomial_space(geo, degree=1)
        self.test = fem.make_test(space=self.space)
        self.k = wp.array([1.0], dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def step(self):
        scale = wp.zeros(1, dtype=float{rg})
        rhs = wp.zeros(self.space.node_count(), dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(double, dim=1, inputs=[self.k, scale])
            fem.integrate(load_form, fields={{"v": self.test}}, values={{"scale": scale}}, output=rhs)
            wp.launch(total, dim=rhs.shape[0], inputs=[rhs, self.loss])
        tape.backward(self.loss)
        tape.zero()


trainer = Trainer()
for _ in range(3):
    trainer.step()
'''

HELPER_STYLE = _HEAD + '''

def assemble(space, test, scale, field):
    fem.interpolate(scaled, dest=field, fields={{"u": field}}, values={{"scale": scale}})
    return field.dof_values


def train(k, loss):
    geo = fem.Grid2D(res=wp.vec2i(4))
    space = fem.make_polynomial_space(geo, degree=1)
    test = fem.make_test(space=space)
    field = fem.make_discrete_field(space=space)
    for _ in range(3):
        scale = wp.empty(1, dtype=float{rg})
        tape = wp.Tape()
        with tape:
            wp.launch(double, dim=1, inputs=[k, scale])
            dofs = assemble(space, test, scale, field)
            wp.launch(total, dim=dofs.shape[0], inputs=[dofs, loss])
        tape.backward(loss)
        tape.zero()


train(wp.array([1.0], dtype=float, requires_grad=True), wp.zeros(1, dtype=float, requires_grad=True))
'''


@pytest.fixture
def index(tmp_path: Path) -> LibraryIndex:
    return LibraryIndex(cache_dir=str(tmp_path / "summaries"))


def _check(text: str, index: LibraryIndex, name: str = "prog.py") -> list[Finding]:
    src, err = parse_file(name, text)
    assert src is not None, err
    return run_rules(build_project({name: src}, library=index))


def _errors(findings: list[Finding], rule: str) -> list[int]:
    return [f.span.line for f in findings if f.rule == rule and f.severity is Severity.ERROR]


@pytest.mark.parametrize("program", [CLASS_STYLE, HELPER_STYLE], ids=["class", "helper"])
def test_fem_call_carries_the_gradient_chain(program: str, index: LibraryIndex) -> None:
    buggy = program.format(rg="")
    line = next(i for i, t in enumerate(buggy.splitlines(), 1) if "scale = wp." in t)
    assert _errors(_check(buggy, index), "WF201") == [line]
    assert _check(program.format(rg=", requires_grad=True"), index) == []


def test_integrate_writes_output_or_accumulates_with_add(index: LibraryIndex) -> None:
    text = _HEAD + '''
geo = fem.Grid2D(res=wp.vec2i(4))
space = fem.make_polynomial_space(geo, degree=1)
test = fem.make_test(space=space)
scale = wp.zeros(1, dtype=float, requires_grad=True)
rhs = wp.zeros(space.node_count(), dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    fem.integrate(load_form, fields={"v": test}, values={"scale": scale}, output=rhs)
    fem.integrate(load_form, fields={"v": test}, values={"scale": scale}, output=rhs, add=True)
    fresh = fem.integrate(load_form, fields={"v": test}, values={"scale": scale})
    wp.launch(total, dim=1, inputs=[fresh, rhs])
'''
    src, err = parse_file("prog.py", text)
    assert src is not None, err
    (trace,) = build_project({"prog.py": src}, library=index).traces
    fem_events = [ev for ev in trace.events if ev.detail.get("library", "").endswith("fem.integrate.integrate")]
    lines = [i for i, t in enumerate(text.splitlines(), 1) if "fem.integrate(" in t]
    assert [(ev.span.line, ev.kind) for ev in fem_events] == [(n, "launch") for n in lines]
    first, added, returned = fem_events
    assert [first.name_of(b) for b in first.writes] == ["rhs"] and not first.accums
    assert [first.name_of(b) for b in first.reads] == ["test.dof_values", "scale"]
    assert [added.name_of(b) for b in added.accums] == ["rhs"] and not added.writes
    # without output= the call returns the array it writes, which the next launch reads
    launch = next(ev for ev in trace.events if ev.kind == "launch" and ev.kernel is not None)
    assert launch.reads[0].id == returned.writes[0].id


def _fem_example(name: str) -> str:
    spec = importlib.util.find_spec("warp")
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parent / "examples" / "fem" / name).read_text(encoding="utf-8")


def test_dropped_requires_grad_in_warp_fem_example(index: LibraryIndex) -> None:
    """Warp's own elastic shape optimization (buffers written and read through ``fem.integrate``): the
    unmodified example has no error; dropping ``requires_grad`` from the intermediate read by the
    normalized load form is a WF201 at its allocation."""
    name = "example_elastic_shape_optimization.py"
    text = _fem_example(name)
    assert not [f for f in _check(text, index, name) if f.severity is Severity.ERROR]
    old = "inv_bottom_length = wp.empty(shape=1, dtype=float, requires_grad=True)"
    assert old in text
    buggy = text.replace(old, "inv_bottom_length = wp.empty(shape=1, dtype=float)")
    assert _errors(_check(buggy, index, name), "WF201") == [buggy[: buggy.index("inv_bottom_length = wp.")].count("\n") + 1]
