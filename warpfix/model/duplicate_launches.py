"""WF5xx: double counting (checklist section 7).

Warp makes the last write to an array win in the backward pass by *consuming* the adjoint at
every store: the store's adjoint reads ``x.grad[i]`` and zeroes it, so an earlier write receives
only the gradient of the reads that happened in between. ``retain_grad=True`` switches that
zeroing off; an array written by two recorded ops then hands the same adjoint to both.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpfix.finding import Span
from warpfix.model.facts import Event, KernelDef, Trace
from warpfix.model.tapeflow import forget_reset_tape
from warpfix.model.value_reads import event_value_reads, overwritten_params, tape_ids

_ARRAY_OPS = ("launch", "copy", "assign", "clone", "zero", "fill", "host_write", "call")


def _idempotent(kd: KernelDef) -> bool:
    """The kernel only stores into its outputs (no accumulation, no read-modify-write), and reads no
    array it writes: launching it twice in a row leaves the same values as launching it once."""
    written = overwritten_params(kd)
    for name, p in kd.params.items():
        if not p.is_array:
            continue
        if p.has("accum", "atomic", "rmw", "inplace_mul"):
            return False
        if name in written and p.has("read"):
            return False
    return bool(written)


def accumulates_only(kd: KernelDef) -> bool:
    """The kernel changes its arrays only by accumulation (``+=``, atomics), never stores or scales
    them in place, and reads none of the arrays it accumulates into: a repeat adds the same amount
    again."""
    modified = False
    for p in kd.params.values():
        if not p.is_array:
            continue
        if p.has("write", "rmw", "inplace_mul"):
            return False
        if p.accumulated:
            modified = True
            if p.has("read"):
                return False
    return modified


def _reads_own_output(ev: Event) -> bool:
    """An output of the launch is bound to the same array as one of its inputs."""
    assert ev.kernel is not None
    written = overwritten_params(ev.kernel)
    outs = {b.id for p, b in ev.binding.items() if p in written or ev.kernel.params[p].accumulated}
    return any(b.id in outs for b, _ in event_value_reads(ev))


def _same_launch(a: Event, b: Event) -> bool:
    if a.kernel is None or a.kernel is not b.kernel or a.span == b.span:
        return False
    if set(a.arg_nodes) != set(b.arg_nodes):
        return False
    if any(ast.dump(a.arg_nodes[p]) != ast.dump(b.arg_nodes[p]) for p in a.arg_nodes):
        return False
    return {p: x.id for p, x in a.binding.items()} == {p: x.id for p, x in b.binding.items()}


def trace_duplicates(trace: Trace) -> list[tuple[Event, Event]]:
    """:func:`duplicate_launches` of ``trace``, found once for the rules that read them (WF501, WF502)."""
    found = trace.memo.get("duplicates")
    if found is None:
        found = trace.memo["duplicates"] = list(duplicate_launches(trace))
    return found  # type: ignore[return-value]


def trace_retained(trace: Trace) -> dict[int, Span]:
    """:func:`retain_spans` of ``trace``, found once for the rules that read them (WF501, WF502)."""
    found = trace.memo.get("retained")
    if found is None:
        found = trace.memo["retained"] = retain_spans(trace)
    return found  # type: ignore[return-value]


def duplicate_launches(trace: Trace) -> Iterator[tuple[Event, Event]]:
    """(first, repeat) pairs: the same idempotent or purely accumulating launch recorded twice in a
    row on one tape, with no write to the first launch's inputs in between."""
    last: dict[int, Event] = {}  # tape -> last recorded array op
    between_writes: dict[int, set[int]] = {}  # tape -> buffers written since that op
    for ev in trace.events:
        if forget_reset_tape(ev, last):
            continue
        if ev.kind not in _ARRAY_OPS:
            continue
        if not ev.recorded:
            for tape in between_writes:
                between_writes[tape].update(b.id for b in ev.writes)
            continue
        for tape in tape_ids(ev):
            prev = last.get(tape)
            if (
                prev is not None
                and ev.kind == "launch"
                and prev.kind == "launch"
                and _same_launch(prev, ev)
                and ev.kernel is not None
                and (_idempotent(ev.kernel) or accumulates_only(ev.kernel))
                and not _reads_own_output(ev)
                and not between_writes.get(tape, set()) & {b.id for b, _ in event_value_reads(prev)}
            ):
                yield prev, ev
            last[tape] = ev
            between_writes[tape] = set()


def retain_spans(trace: Trace) -> dict[int, Span]:
    """Buffers that keep their gradient: ``x.retain_grad = True`` (the model's ``Buffer.retain_grad``) or
    ``retain_grad=True`` passed to the allocation (the span of the allocation call)."""
    out: dict[int, Span] = {}
    for ev in trace.events:
        if ev.kind == "alloc" and isinstance(ev.node, ast.Call):
            for kw in ev.node.keywords:
                if kw.arg == "retain_grad" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                    out.update((b.id, ev.span) for b in ev.writes)
        for buf in (*ev.reads, *ev.writes):
            if buf.retain_grad is not None:
                out.setdefault(buf.id, buf.retain_grad)
    return out
