"""Work the model does not repeat: what is computed once per library function or per span, counted
on newton's real diffsim examples (no Warp program runs), with the results unchanged."""

from __future__ import annotations

import gc
import importlib.util
import types
from collections import Counter
from pathlib import Path

import pytest

from warpfix.engine import parse_file, run_rules
from warpfix.model import build_project
from warpfix.model import host as host_module
from warpfix.model.host import library_callbacks
from warpfix.model.library import LibraryIndex, shared_index
from warpfix.model.taped import TapedIndex

HAS_NEWTON = importlib.util.find_spec("newton") is not None
pytestmark = pytest.mark.skipif(not HAS_NEWTON, reason="newton is not installed")


def _example(name: str) -> str:
    spec = importlib.util.find_spec("newton")
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parent / "examples" / "diffsim" / f"example_diffsim_{name}.py").read_text("utf-8")


def _findings(text: str, index: LibraryIndex) -> list[dict]:
    src, err = parse_file("example.py", text)
    assert src is not None, err
    return [f.to_json() for f in run_rules(build_project({"example.py": src}, library=index))]


def test_library_callbacks_and_names_are_read_once_per_process(monkeypatch) -> None:
    """The editor checks the same program on every change: the second check reads no library
    function's callbacks and resolves no library name again, and finds the same."""
    index = shared_index()  # the process's (other tests may have filled it already)
    calls: list[str] = []
    real_callbacks, real_resolve = library_callbacks.callback_ops, LibraryIndex._resolve

    def counted_callbacks(src, fn, params):
        calls.append(f"callbacks {src.path}:{fn.lineno}")
        return real_callbacks(src, fn, params)

    def counted_resolve(self, dotted, depth):
        calls.append(f"resolve {dotted}")
        return real_resolve(self, dotted, depth)

    monkeypatch.setattr(library_callbacks, "callback_ops", counted_callbacks)
    monkeypatch.setattr(LibraryIndex, "_resolve", counted_resolve)
    text = _example("cloth")
    first = _findings(text, index)
    assert len(calls) == len(set(calls)), "each is read once within a check too"
    # the example builds its model outside a tape: what those newton functions call back is kept
    assert any("newton" in path for path, *_ in index.callbacks)
    assert any(dotted.startswith("newton.") for dotted, _ in index._resolved)
    calls.clear()
    again = _findings(text + "\nEDITED = 1\n", index)
    assert calls == []
    assert again == first


def _reference_host_lines(index: TapedIndex) -> dict[tuple[str, int], bool]:
    """``TapedIndex.host_lines`` computed the plain way: every span of every event, every time."""
    out: dict[tuple[str, int], bool] = {}
    for trace in index.project.traces:
        pending: set[int] = set()
        recorded_by: set[int] = set()
        for ev in trace.events:
            taped = ev.recorded or ev.kind in ("tape_begin", "tape_end", "backward", "tape_zero", "tape_reset") \
                or bool(pending)
            if ev.recorded:
                recorded_by.update(s.tape for s in ev.tapes)
            if ev.kind == "tape_end" and ev.tape in recorded_by:
                pending.add(ev.tape)
            elif ev.kind in ("backward", "tape_reset") and ev.tape is not None:
                pending.discard(ev.tape)
            for span in (ev.span, *ev.call_stack):
                for line in range(span.line, min(span.end_line, span.line + 200) + 1):
                    out[(span.path, line)] = out.get((span.path, line), False) or taped
    return out


@pytest.mark.parametrize("name", ["cloth", "ball"])
def test_taped_lines_marks_each_span_once_with_the_same_result(name: str) -> None:
    src, err = parse_file("example.py", _example(name))
    assert src is not None, err
    project = build_project({"example.py": src}, library=shared_index())
    index = TapedIndex(project)
    spans = [(ev.span, *ev.call_stack) for trace in project.traces for ev in trace.events]
    marked = sum(len(s) for s in spans)
    assert len(index._marked) < marked  # call sites repeat in the stacks of their events
    assert any(v for v in index.host_lines.values()) and not all(index.host_lines.values())
    assert index.host_lines == _reference_host_lines(index)


def test_tracing_leaves_no_cycles_per_library_call() -> None:
    """Traces are built with the collector paused: a reference cycle made per call (a recursive
    closure, ``ast.literal_eval``'s helpers) stays in memory until the check ends."""
    text = _example("cloth") + "\n\ndef extra():\n    d = {'a': 1, 2: 'b'}\n    return d\n"
    src, err = parse_file("example.py", text)
    assert src is not None, err
    project = build_project({"example.py": src}, library=shared_index())
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        assert any(ev.detail.get("library") for trace in project.traces for ev in trace.events)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        leaked = Counter(o.__qualname__ for o in gc.garbage if isinstance(o, types.FunctionType))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert not [name for name in leaked if name.startswith(("HostInterpreter.", "literal_eval."))], leaked


_CYCLIC = '''
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


class Sim:
    def __init__(self, n):
        self.x = wp.zeros(n, dtype=float, requires_grad=True)
        self.y = wp.zeros(n, dtype=float, requires_grad=True)
        self.run = self.step  # the object holds its own bound method: a reference cycle

    def step(self):
        wp.launch(scale, dim=4, inputs=[self.x], outputs=[self.y])
'''


def test_tracing_frees_the_values_of_finished_roots() -> None:
    """The interpreter's values of a root (here an object holding its own bound method) are garbage
    once the root is traced: they are collected, not kept in memory until the check ends, and the
    collector's state is as before."""
    text = _CYCLIC + "".join(f"\n\ndef root_{k}():\n    sim = Sim(4)\n    sim.step()\n" for k in range(5))
    src, err = parse_file("cyclic.py", text)
    assert src is not None, err
    project = build_project({"cyclic.py": src}, library=shared_index())
    was_enabled = gc.isenabled()
    gc.collect()
    frozen = gc.get_freeze_count()
    try:
        traces = project.traces
        assert gc.isenabled() == was_enabled and gc.get_freeze_count() == frozen
        launching = {t.root for t in traces if any(ev.kind == "launch" for ev in t.events)}
        assert launching >= {f"cyclic.py:root_{k}" for k in range(5)}
        gc.set_debug(gc.DEBUG_SAVEALL)  # what is garbage now, kept to be looked at
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, host_module.Val)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []


def test_a_finished_roots_values_are_collected_before_the_next_root(monkeypatch) -> None:
    """Memory is bounded by a root, not the project: with every root's garbage collected as soon as
    it ends, the values alive when a root starts do not grow with the roots traced before it."""
    from warpfix import model

    text = _CYCLIC + "".join(f"\n\ndef root_{k}():\n    sim = Sim(4)\n    sim.step()\n" for k in range(6))
    src, err = parse_file("cyclic.py", text)
    assert src is not None, err
    project = build_project({"cyclic.py": src}, library=shared_index())
    alive: list[int] = []
    real_reset = host_module.HostInterpreter.reset

    def counted_reset(self) -> None:
        alive.append(sum(isinstance(o, host_module.Val) for o in gc.get_objects()))
        real_reset(self)

    monkeypatch.setattr(host_module.HostInterpreter, "reset", counted_reset)
    monkeypatch.setattr(model, "YOUNG_LIMIT", 0, raising=False)  # collect after every root, however small
    assert project.traces
    assert len(alive) >= 7 and alive[-1] == alive[-4], alive  # the last three roots leave nothing behind


class _CountedIterations(list):
    """A project's traces that count the passes made over them."""

    passes = 0

    def __iter__(self):
        type(self).passes += 1
        return super().__iter__()


def _rmw_program(n: int) -> str:
    kernels = "".join(f'''
@wp.kernel
def clamp_{k}(q: wp.array(dtype=float), q_max: float):
    i = wp.tid()
    if q[i] > q_max:
        q[i] = q_max
''' for k in range(n))
    launches = "".join(f"        wp.launch(clamp_{k}, dim=4, inputs=[q, 1.0])\n" for k in range(n))
    return f'''import warp as wp
{kernels}

@wp.kernel
def loss_k(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, q[wp.tid()])


def train():
    q = wp.ones(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
{launches}        wp.launch(loss_k, dim=4, inputs=[q, loss])
    tape.backward(loss)
'''


def test_kernel_rmw_passes_over_the_traces_do_not_grow_with_the_kernels_it_reports() -> None:
    from warpfix.rules.wf106_kernel_rmw import KernelRmw

    passes = {}
    for n in (1, 4):
        src, err = parse_file("rmw.py", _rmw_program(n))
        assert src is not None, err
        project = build_project({"rmw.py": src}, library=shared_index())
        project.__dict__["traces"] = _CountedIterations(project.traces)
        _CountedIterations.passes = 0
        found = list(KernelRmw().check(project))
        assert sorted(f.data["kernel"] for f in found) == [f"clamp_{k}" for k in range(n)]
        assert all(len(f.related) >= 1 for f in found)
        passes[n] = _CountedIterations.passes
    assert passes[4] == passes[1], passes
