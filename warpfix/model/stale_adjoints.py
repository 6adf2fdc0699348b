"""Adjoints a backward leaves in intermediate arrays, and which later backward adds to them.

Warp's adjoint of a store (``y[i] = v``) reads ``y.grad[i]`` and clears it, so an array a taped
kernel overwrites ends every backward with a clean gradient. An array the tape only accumulates into
(``wp.atomic_add``, ``+=``; zeroed or filled on the host, which records nothing) has no store to
clear it: once a taped op reads it, the backward leaves its adjoint in ``.grad``. When the same array
is recorded again (a new tape per iteration, the intermediate allocated once) and nothing zeroes that
gradient (``tape.zero()`` / ``reset()`` of a tape that recorded it, ``x.grad.zero_()``), the next
backward starts from the old adjoint and hands it on to whatever was accumulated into the array.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from warpfix.model.facts import Event, exclusive
from warpfix.model.grad_walk import Recording
from warpfix.model.tapeflow import DIFFERENTIABLE, tape_of


@dataclass(frozen=True)
class StaleAdjoint:
    """A backward that starts from adjoints an earlier backward left in intermediates it records again."""

    backward: Event
    earlier: Event
    names: list[str]  # each array as a recorded launch that accumulates into it passes it
    # the names of the arrays accumulated into by a launch of the backward's own function call (same call
    # stack): those that mean the same array where the backward runs (a library's ``state_in.particle_f``
    # does not)
    local: list[str]
    intermediates: frozenset[int]  # ids of every array whose adjoint the backward leaves (stale or not)


def stale_adjoints(events: list[Event]) -> Iterator[StaleAdjoint]:
    """Each backward that starts from adjoints an earlier backward left in intermediates it records
    again, none of them zeroed in between."""
    recordings: dict[int, Recording] = {}
    # tape -> the arrays its backwards registered: what its ``zero()`` clears (Warp's ``Tape.gradients``,
    # filled by ``backward``; a fresh tape's ``zero()`` clears nothing)
    registered: dict[int, set[int]] = {}
    held: dict[int, Event] = {}  # array id -> the backward that left its adjoint
    for ev in events:
        tape = tape_of(ev)
        if tape is not None and ev.kind in DIFFERENTIABLE:
            recordings.setdefault(tape, Recording()).add(ev)
        if ev.kind == "backward" and ev.tape is not None and ev.tape in recordings:
            # the loss's gradient is set by the backward itself (seeded with 1); one seeded by hand or by
            # grads= sets gradients of written arrays on purpose, so it is not judged
            seeded = {b.root().id for b in ev.reads}
            left = {k: v for k, v in recordings[ev.tape].left_adjoints().items() if k not in seeded}
            judged = bool(ev.reads) and not ev.detail.get("grads")
            stale = [k for k in left if k in held and held[k] is not ev and not exclusive(held[k], ev)]
            if stale and judged:
                local = [left[k][1] for k in stale if left[k][2].call_stack == ev.call_stack]
                yield StaleAdjoint(ev, held[stale[0]], list(dict.fromkeys(left[k][1] for k in stale)),
                                   list(dict.fromkeys(local)), frozenset(left))
            for k in left:
                held[k] = ev
            registered.setdefault(ev.tape, set()).update(recordings[ev.tape].arrays())
        elif ev.kind in ("tape_zero", "tape_reset") and ev.tape is not None:
            for k in registered.get(ev.tape, ()):
                held.pop(k, None)
            if ev.kind == "tape_reset":
                recordings.pop(ev.tape, None)
        elif ev.kind == "capture_launch":  # a replayed graph the model does not follow: unknown
            held.clear()
        elif ev.kind == "grad_zero":
            for buf in ev.writes:
                if buf.grad_of is not None:
                    held.pop(buf.grad_of.root().id, None)
