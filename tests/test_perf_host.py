"""Work the host interpreter does not repeat (counted, not timed), with the traces unchanged."""

from __future__ import annotations

from collections import Counter

from warpfix.engine import parse_file
from warpfix.model import build_project
from warpfix.model.host import Val
from warpfix.model.library import shared_index
from warpfix.model.source import SourceFile

_PROGRAM = '''
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


def step(x, y):
    for _ in range(8):
        wp.launch(scale, dim=4, inputs=[x], outputs=[y])


def root_a():
    x = wp.zeros(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        step(x, y)
    tape.backward(loss=y)


def root_b():
    x = wp.zeros(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    step(x, y)
    step(y, x)
'''


def test_an_events_span_is_computed_once_per_node(monkeypatch) -> None:
    """A launch in an unrolled loop of a function two roots call is one node: its span (and the
    call site's, on each event's stack) is computed once, and every event still carries the
    node's span."""
    asked: Counter[int] = Counter()
    real_span = SourceFile.span

    def counted_span(self: SourceFile, node):
        asked[id(node)] += 1
        return real_span(self, node)

    monkeypatch.setattr(SourceFile, "span", counted_span)
    src, err = parse_file("prog.py", _PROGRAM)
    assert src is not None, err
    traces = build_project({"prog.py": src}, library=shared_index()).traces
    launches = [ev for t in traces for ev in t.events if ev.kind == "launch"]
    assert len(launches) >= 9  # the unrolled passes of the loop, from each of three calls
    assert len({id(ev.node) for ev in launches}) == 1
    assert asked[id(launches[0].node)] == 1
    for ev in (ev for t in traces for ev in t.events):
        assert ev.span == real_span(src, ev.node)
    call_sites = {id(span) for ev in launches for span in ev.call_stack}
    assert len(call_sites) == 3  # ``step(x, y)`` in root_a; ``step(x, y)``, ``step(y, x)`` in root_b


def test_values_carry_no_per_instance_dict() -> None:
    """The interpreter makes millions of values: slotted, with the sets and lists most leave empty
    shared and immutable."""
    a, b = Val(1, "a"), Val(2, "b")
    assert not hasattr(a, "__dict__")
    assert a.bound_attrs is b.bound_attrs and a.aliased_by is b.aliased_by
