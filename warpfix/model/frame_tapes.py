"""A tape made anew in every pass of a frame loop, with one backward after the loop (WF601's truncation
shape): the backward replays the last pass's recording only, while state carries from pass to pass."""

from __future__ import annotations

from dataclasses import dataclass

from warpfix.model.facts import Buffer, Event, Loop, Trace
from warpfix.model.tapeflow import Window, iterations
from warpfix.model.window_carry import carried_buffers, window_params


@dataclass
class TruncatedTape:
    """The evidence: the first pass's recording (``begin``), never backward-ed; the backward after the
    loop (``backward``) on a later pass's tape; the carried state, read on the next pass's tape by
    ``reader``; the leaves the first pass reads (``params``)."""

    begin: Event
    backward: Event
    reader: Event
    carried: list[Buffer]
    params: dict[int, Buffer]
    # launches just before the loop, in its function call, that no tape records, which read an array with a
    # gradient and write what the first pass reads on its tape (an initial state set from a parameter):
    # with one tape over the passes they must be recorded too, or that parameter's gradient stays zero
    setup: list[Event]


def truncated_tape(trace: Trace, loop: Loop) -> TruncatedTape | None:
    """The first pass pair of ``loop`` that records on a fresh tape per pass, carries state from pass 0 to
    pass 1 and whose tapes are backward-ed only after the loop, on a pass after the first."""
    if not loop.contains_tape or loop.contains_backward:
        return None
    for w0, w1 in iterations(trace, loop.id):
        found = _pair(trace, loop, w0, w1)
        if found is not None:
            return found
    return None


def _begins(events: list[Event]) -> list[Event]:
    return [e for e in events if e.kind == "tape_begin" and e.tape is not None]


def _pair(trace: Trace, loop: Loop, w0: Window, w1: Window) -> TruncatedTape | None:
    events = trace.events
    first, second = events[w0.start : w0.stop], events[w1.start : w1.stop]
    begins0, begins1 = _begins(first), _begins(second)
    tapes0 = {e.tape for e in begins0}
    if not begins0 or not begins1 or tapes0 & {e.tape for e in begins1}:
        return None  # one tape re-entered in every pass records them all
    if any(e.kind in ("backward", "tape_zero", "tape_reset") for e in first + second):
        return None
    # every tape the loop's passes (this run of the loop) began; the first backward after the loop on one
    prefix = first[0].loops[: _position(first[0], loop.id)]
    loop_tapes = {
        e.tape for e in events if e.kind == "tape_begin" and e.loops[: len(prefix)] == prefix
        and any(lid == loop.id for lid, _ in e.loops)
    }
    end = _loop_end(events, w1.stop, loop.id, prefix)
    backward = next((e for e in events[end:] if e.kind == "backward" and e.tape in loop_tapes), None)
    if backward is None or backward.tape in tapes0:
        return None
    if any(e.kind == "backward" and e.tape in tapes0 for e in events[w0.stop :]):
        return None
    params = window_params(first)
    if not params:
        return None
    carried = carried_buffers(first, second)
    if carried is None:
        return None
    reader, bufs = carried
    return TruncatedTape(begins0[0], backward, reader, bufs, params, _setup(events, w0.start, first, prefix))


def _setup(events: list[Event], start: int, first: list[Event], prefix: tuple) -> list[Event]:
    """The untaped launches right before the loop's first pass (see :attr:`TruncatedTape.setup`), in order:
    the run of events of the loop's function call, outside the loop, back to the first event on a tape,
    a backward, a call deeper or shallower, or a loop."""
    head = first[0]
    stack = head.call_stack
    taped_reads = {b.root().id for e in first if e.recorded for b in e.reads}
    found: list[Event] = []
    for ev in reversed(events[:start]):
        if ev.tapes or ev.kind in ("backward", "tape_begin", "tape_zero", "tape_reset"):
            break
        if ev.call_stack != stack or ev.loops != prefix:
            break
        if ev.kind != "launch":
            continue
        feeds = any(b.root().id in taped_reads for b in ev.writes)
        from_param = any(b.root().requires_grad and b.root().grad_of is None for b in ev.reads)
        if feeds and from_param:
            found.append(ev)
    return found[::-1]


def _position(ev: Event, loop_id: int) -> int:
    return next(k for k, (lid, _) in enumerate(ev.loops) if lid == loop_id)


def _loop_end(events: list[Event], start: int, loop_id: int, prefix: tuple) -> int:
    """Index of the first event after ``start`` outside this run of the loop."""
    for idx in range(start, len(events)):
        ev = events[idx]
        if ev.loops[: len(prefix)] != prefix or not any(lid == loop_id for lid, _ in ev.loops):
            return idx
    return len(events)
