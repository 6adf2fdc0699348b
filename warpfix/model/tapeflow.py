"""Shared helpers for the tape-flow rules (WF2xx, WF3xx, WF6xx): reading launch events,
tapes and unrolled loops out of a :class:`~warpfix.model.facts.Trace`.

Not a rule module (the registry only loads ``wf*.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from warpfix.finding import Span
from warpfix.model.facts import Buffer, Event, Trace

#: Events that Warp records on a tape and differentiates.
DIFFERENTIABLE = frozenset({"launch", "copy", "clone", "assign", "record_func"})
#: Events that overwrite the contents of an existing array.
WRITES = frozenset({"launch", "copy", "assign", "zero", "fill", "host_write"})

_INT_DTYPES = frozenset(
    {"int", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "Int", "Bool"}
)


def is_integer_dtype(expr: str | ast.expr | None) -> bool:
    """Whether an annotation/dtype expression names an integer or boolean element type
    (``wp.array(dtype=int)``, ``wp.int32``, ``wp.array2d(dtype=wp.uint8)``, ``wp.array[wp.int32]``)."""
    if expr is None:
        return False
    if isinstance(expr, str):
        try:
            node: ast.expr = ast.parse(expr, mode="eval").body
        except SyntaxError:
            return False
    else:
        node = expr
    if isinstance(node, ast.Call):
        dtype = next((kw.value for kw in node.keywords if kw.arg == "dtype"), None)
        if dtype is None and node.args:
            dtype = node.args[0]
        return dtype is not None and is_integer_dtype(dtype)
    if isinstance(node, ast.Subscript):  # wp.array[int], wp.array2d[wp.int32, ...]
        index = node.slice
        return is_integer_dtype(index.elts[0] if isinstance(index, ast.Tuple) and index.elts else index)
    if isinstance(node, ast.Attribute):
        return node.attr in _INT_DTYPES
    if isinstance(node, ast.Name):
        return node.id in _INT_DTYPES
    return False


def _param_of(ev: Event, buf: Buffer) -> str | None:
    return next((p for p, b in ev.binding.items() if b.id == buf.id), None)


def true_reads(ev: Event) -> list[Buffer]:
    """Buffers whose *values* the event reads. For a launch of a known kernel this excludes
    arrays that are only accumulated into (``+=``, atomics): those adjoints need no value."""
    if ev.kind != "launch" or ev.kernel is None:
        return list(ev.reads)
    out: list[Buffer] = []
    for buf in ev.reads:
        param = _param_of(ev, buf)
        facts = ev.kernel.params.get(param) if param is not None else None
        if facts is None or facts.has("read", "rmw", "inplace_mul"):
            out.append(buf)
    return out


def outputs(ev: Event) -> list[Buffer]:
    """Buffers the event overwrites or accumulates into."""
    out = list(ev.writes)
    out.extend(b for b in ev.accums if all(b.id != w.id for w in ev.writes))
    return out


def integer_param(ev: Event, buf: Buffer) -> bool:
    """Whether ``buf`` is bound to an integer-typed array parameter of the launched kernel."""
    if ev.kernel is None:
        return False
    param = _param_of(ev, buf)
    facts = ev.kernel.params.get(param) if param is not None else None
    return facts is not None and is_integer_dtype(facts.annotation)


def same(a: Buffer, b: Buffer) -> bool:
    """Whether two buffers share memory (one is a view of the other, or they are one)."""
    return a.root().id == b.root().id


def touches(bufs: Iterable[Buffer], target: Buffer) -> bool:
    return any(same(b, target) for b in bufs)


def tape_of(ev: Event) -> int | None:
    """The innermost tape recording ``ev`` (None when not recorded)."""
    return ev.tapes[-1].tape if ev.recorded else None


def conditional_launch(ev: Event) -> bool:
    """A project launch under an undecided ``if`` of a function the taped block calls
    (``Event.detail["conditional"]``): the tape may record it, nothing says it does. Launches replayed
    from a library summary do not count: a summary marks every launch under any ``if`` of the library
    (``if model.particle_count:``), which nearly all are."""
    return bool(ev.detail.get("conditional")) and "library" not in ev.detail


def runs_with(ev: Event, other: Event) -> bool:
    """Whether ``ev`` runs whenever ``other`` does, as far as ``if`` statements go: every branch arm
    enclosing ``ev`` also encloses ``other``."""
    arms = set(other.branches)
    return all(b in arms for b in ev.branches)


def line_ref(span: Span, here: Span) -> str:
    """``line N`` when in the same file as ``here``, else ``path:N``."""
    return f"line {span.line}" if span.path == here.path else f"{span.path}:{span.line}"


def contains(outer: Span, inner: Span) -> bool:
    """Whether ``inner`` lies within ``outer`` (same file)."""
    if outer.path != inner.path:
        return False
    return (outer.line, outer.column) <= (inner.line, inner.column) and (
        inner.end_line,
        inner.end_column,
    ) <= (
        outer.end_line,
        outer.end_column,
    )


def anchor(ev: Event, ref: Event) -> Span:
    """The statement through which ``ev`` runs, seen from the function that runs ``ref``: when ``ev``
    happens inside a project call made from that function, the call site; else ``ev``'s own span."""
    depth = len(ref.call_stack)
    if len(ev.call_stack) > depth and ev.call_stack[:depth] == ref.call_stack:
        return ev.call_stack[depth]
    return ev.span


@dataclass(frozen=True)
class Window:
    """One unrolled iteration of a loop: the half-open event index range ``[start, stop)``."""

    loop: int
    iteration: int
    start: int
    stop: int


def iterations(trace: Trace, loop_id: int) -> list[tuple[Window, Window]]:
    """Consecutive (iteration 0, iteration 1) pairs of ``loop_id`` in program order. A loop nested in
    another unrolled loop yields one pair per execution of the enclosing body. Every loop's pairs
    come from one pass over the trace, kept in its memo (rules ask for each loop of each trace)."""
    pairs = trace.memo.get("iterations")
    if pairs is None:
        pairs = trace.memo["iterations"] = _iteration_pairs(trace)
    return pairs.get(loop_id, [])  # type: ignore[union-attr]


def _iteration_pairs(trace: Trace) -> dict[int, list[tuple[Window, Window]]]:
    # per loop: (enclosing iterations, window) of its contiguous runs of events
    runs: dict[int, list[tuple[tuple, Window]]] = {}
    for idx, ev in enumerate(trace.events):
        seen: set[int] = set()
        for pos, (loop_id, iteration) in enumerate(ev.loops):
            if loop_id in seen:  # a loop entered again inside itself: its outermost position counts
                continue
            seen.add(loop_id)
            key = (ev.loops[:pos], iteration)
            mine = runs.setdefault(loop_id, [])
            if mine and mine[-1][0] == key and mine[-1][1].stop == idx:
                mine[-1] = (key, Window(loop_id, iteration, mine[-1][1].start, idx + 1))
            else:
                mine.append((key, Window(loop_id, iteration, idx, idx + 1)))
    return {
        loop_id: [
            (w0, w1)
            for (k0, w0), (k1, w1) in zip(mine, mine[1:], strict=False)
            if k0[0] == k1[0] and w0.iteration == 0 and w1.iteration == 1 and w0.stop == w1.start
        ]
        for loop_id, mine in runs.items()
    }


#: events that end what a tape has recorded so far: its backward consumed it, or ``reset()`` dropped it
RESET_KINDS = ("backward", "tape_reset")


def forget_reset_tape(ev: Event, per_tape: dict[int, object]) -> bool:
    """When ``ev`` ends what its tape recorded (:data:`RESET_KINDS`), drop that tape's entry of
    ``per_tape`` (every entry when the event names no tape) and return True; else return False."""
    if ev.kind not in RESET_KINDS:
        return False
    if ev.tape is None:
        per_tape.clear()
    else:
        per_tape.pop(ev.tape, None)
    return True


def next_backward(events: list[Event], idx: int, tape: int) -> Event | None:
    for ev in events[idx + 1 :]:
        if ev.tape == tape and ev.kind == "tape_reset":
            return None
        if ev.tape == tape and ev.kind == "backward":
            return ev
    return None


def tape_display_name(ev: Event) -> str:
    return str(ev.detail.get("tape_name") or "tape")


def describe_event(ev: Event) -> str:
    if ev.kind == "launch":
        name = ev.kernel.name if ev.kernel else ev.detail.get("kernel", "?")
        return f"launch of `{name}`"
    if ev.kind in ("zero", "fill"):
        return f"`{ev.name_of(ev.writes[0])}.{ev.kind}_()`" if ev.writes else f"`{ev.kind}_()`"
    if ev.kind == "host_write":
        return "host write to " + ", ".join(f"`{ev.name_of(b)}`" for b in ev.writes)
    return f"`wp.{ev.kind}`" if ev.kind != "assign" else "`assign`"
