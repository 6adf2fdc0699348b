"""What a tape did with an array before and after an unrecorded ``x.zero_()`` / ``x.fill_(v)`` (WF105).

The *window* of a reset is the part of the trace since the last backward or reset of the tapes
recording it. In that window the reset's *era* is what followed the last recorded write of the
buffer (or the window's start): the recorded reads of the values the reset destroys. Two facts
decide how such a reset can be repaired without changing a forward value:

* when every reader of the era is a ``wp.launch`` of the project's own code, each can read a
  snapshot instead (``inputs=[wp.clone(x), ...]``): the copy is recorded, so the gradient still
  reaches ``x``, and the reader's adjoint replays against the snapshot, which nothing overwrites;
* that is exact only when nothing on the tape touches the buffer after the reset (until the
  tape's backward or reset): a later recorded read or write would accumulate into the same
  ``x.grad`` as the era before the reset, and the adjoint of the era's write would hand both on;
* and only when a recorded store opened the era (a kernel's ``x[i] = ...``, a copy into ``x``):
  ``wp.clone`` also copies ``x.grad`` into the copy's gradient, which the copy's adjoint adds back.
  The store's adjoint consumes ``x.grad`` at every backward, so it is zero when the copy is made;
  an array no recorded op writes (a leaf) keeps the gradient of earlier backwards until the program
  zeroes it, and a snapshot would count that twice (as would ``retain_grad``). The edit changes the
  launch for every run of it, so each recorded run in the trace must read a stored array there.

A reset that only copies read (``wp.clone(x)``, ``wp.copy(y, x)``), with nothing after it, is no
hazard at all: a copy's adjoint needs no value, and no later gradient mixes into ``x.grad``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from warpfix.finding import Span
from warpfix.model.facts import Buffer, Event, Trace
from warpfix.model.tapeflow import RESET_KINDS, forget_reset_tape
from warpfix.model.value_reads import event_modifies, event_overwrites, event_value_reads, tape_ids

#: events that may access an array's contents (rebindings, allocations and gradient handling do not)
_ACCESS_KINDS = ("launch", "copy", "clone", "assign", "zero", "fill", "host_write", "call", "field_set")
_COPY_KINDS = ("copy", "clone", "assign")


@dataclass(frozen=True)
class Reader:
    """A recorded read of the reset buffer: the event, and the argument expression that passed it."""

    event: Event
    param: str | None

    @property
    def text(self) -> str | None:
        """The argument as written at a project launch (None when it is not one plain argument)."""
        ev = self.event
        if ev.kind != "launch" or ev.kernel is None or "library" in ev.detail or self.param is None:
            return None
        if "." in self.param:  # a field of a struct argument: no argument of its own to snapshot
            return None
        node = ev.arg_nodes.get(self.param)
        return ast.unparse(node) if node is not None else None


@dataclass(frozen=True)
class ResetEra:
    """The recorded accesses of a reset buffer around the reset (see the module docstring)."""

    readers: tuple[Reader, ...]  # recorded value reads since the era's write (or the window's start)
    opened: Event | None  # the recorded store that opened the era (None: the window's start, a reset, an add)
    before_write: Event | None  # a recorded read of the window that a recorded write followed
    writer_reads: bool  # the write that opened the era reads the buffer itself
    foreign: Event | None  # a recorded access of the era that is neither a read nor the opening write
    later: Event | None  # the first recorded access of the buffer after the reset, on one of its tapes
    retains: bool  # the buffer has ``retain_grad``

    @property
    def copies_only(self) -> bool:
        """Only copies read what the reset destroys, and nothing touches the buffer after it."""
        return (bool(self.readers) and self.later is None and self.foreign is None and self.before_write is None
                and not self.writer_reads and all(r.event.kind in _COPY_KINDS for r in self.readers))

    def snapshot_refusal(self, name: str) -> str | None:
        """Why the readers cannot read a snapshot instead, or None when they can."""
        if self.later is not None:
            return (f"the tape touches `{name}` again after the reset (line {self.later.span.line}): "
                    "the two eras would share one gradient")
        if self.before_write is not None:
            return f"`{name}` is read at line {self.before_write.span.line} and then written again on the tape"
        if self.writer_reads:
            return f"the write that produced `{name}` on the tape also reads it"
        if self.opened is None:
            return (f"no recorded store writes `{name}` on the tape before it is read: a copy (`wp.clone`) would "
                    f"take over the gradient `{name}.grad` holds then and count it twice")
        if self.retains:
            return f"`{name}` keeps its gradient (`retain_grad`): a copy would take it over and count it twice"
        if self.foreign is not None:
            return f"line {self.foreign.span.line} accesses `{name}` on the tape other than by a launch"
        for r in self.readers:
            if r.text is None:
                return f"line {r.event.span.line} reads `{name}` other than as an argument of a project launch"
        return None if self.readers else f"no recorded reader of `{name}`"

    def snapshot_sites(self) -> list[list[object]]:
        """[path, line of the launch, argument text] of each reader, in program order, once each."""
        out: list[list[object]] = []
        for r in self.readers:
            site = [r.event.span.path, r.event.span.line, r.text]
            if site not in out:
                out.append(site)
        return out


def _touches(ev: Event, buf: Buffer) -> bool:
    if ev.kind not in _ACCESS_KINDS:
        return False
    root = buf.root().id
    bufs = (*ev.reads, *ev.writes, *ev.accums, *ev.binding.values())
    return any(b.id == buf.id or b.root().id == root for b in bufs)


def reset_era(trace: Trace, position: int, buf: Buffer) -> ResetEra:
    """The era of the reset at ``trace.events[position]`` (which resets ``buf``)."""
    events = trace.events
    tapes = tape_ids(events[position])

    def on_tape(ev: Event) -> bool:
        return ev.recorded and bool(tape_ids(ev) & tapes)

    def resets(ev: Event) -> bool:
        return ev.kind in RESET_KINDS and (ev.tape is None or ev.tape in tapes)

    root = buf.root().id
    start = next((k + 1 for k in range(position - 1, -1, -1) if resets(events[k])), 0)
    readers: list[Reader] = []
    opened: Event | None = None
    before_write: Event | None = None
    writer_reads = False
    foreign: Event | None = None
    for ev in events[start:position]:
        if not on_tape(ev) or not _touches(ev, buf):
            continue
        read = [(b, p) for b, p in event_value_reads(ev) if b.root().id == root]
        if any(b.root().id == root for b, _ in event_modifies(ev)):
            if readers or foreign is not None:
                before_write = before_write or (readers[0].event if readers else foreign)
            stored = ev.kind not in ("zero", "fill") and any(b.root().id == root for b, _ in event_overwrites(ev))
            readers, foreign, writer_reads, opened = [], None, bool(read), ev if stored else None
        elif read and all(b.id == buf.id for b, _ in read):
            readers.extend(Reader(ev, p) for _, p in read)
        elif read or ev.kind != "launch" or "library" in ev.detail:
            foreign = foreign or ev  # a read through a view, a call or library launch that may read it
    later: Event | None = None
    for ev in events[position + 1:]:
        if resets(ev):
            break
        if on_tape(ev) and _touches(ev, buf):
            later = ev
            break
    return ResetEra(tuple(readers), opened, before_write, writer_reads, foreign, later, buf.retain_grad is not None)


def unstored_reader(trace: Trace, era: ResetEra) -> Event | None:
    """A recorded run of one of the era's reader launches (same line, same parameter) that reads there
    an array no recorded store of its tape wrote since that tape's last backward or reset (or one that
    keeps its gradient): the snapshot, made at every run of the launch, would count that array's
    earlier gradient twice."""
    first = trace.memo.get("reset_era:unstored")
    if first is None:
        first = trace.memo["reset_era:unstored"] = _unstored_runs(trace)
    runs = [first[key] for key in ((r.event.span, r.param) for r in era.readers) if key in first]
    return min(runs, key=lambda ev: trace.events.index(ev)) if runs else None


def _unstored_runs(trace: Trace) -> dict[tuple[Span, str | None], Event]:
    """(launch line, parameter) -> the first recorded run of that launch reading, through that parameter,
    an array that no recorded store of its tape wrote since the tape's last backward or reset, or one
    that keeps its gradient."""
    out: dict[tuple[Span, str | None], Event] = {}
    stored: dict[int, set[int]] = {}  # tape -> buffers a recorded store wrote since its last reset
    for ev in trace.events:
        if forget_reset_tape(ev, stored):
            continue
        if not ev.recorded:
            continue
        if ev.kind == "launch":
            for buf, param in event_value_reads(ev):
                if buf.retain_grad is not None or not any(buf.id in stored.get(t, ()) for t in tape_ids(ev)):
                    out.setdefault((ev.span, param), ev)
        if ev.kind not in ("zero", "fill"):
            for buf, _ in event_overwrites(ev):
                for t in tape_ids(ev):
                    stored.setdefault(t, set()).add(buf.id)
    return out
