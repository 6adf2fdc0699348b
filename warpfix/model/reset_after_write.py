"""A ``zero_()`` / ``fill_()`` between a recorded write of an array and a recorded read of it (WF105).

The other WF105 shape (:mod:`warpfix.model.hazards`) is a reset *after a read*. Here nothing on the
tape has read what the writer produced when the reset destroys it::

    with tape:
        wp.launch(draw, ..., inputs=[mesh, rays])     # writes rays
        rays.zero_()                                  # not recorded
        wp.launch(downsample, ..., inputs=[rays, pixels])

The reader sees zeros, but the tape does not know: the reader's adjoint hands ``rays.grad`` to
``draw``'s adjoint, which credits the mesh with values it never produced. An accumulation between
the reset and the reader (``wp.atomic_add`` into the cleared array) keeps the hazard (the tape still
holds the first writer); a recorded overwrite or the tape's backward or reset ends it.
"""

from __future__ import annotations

from dataclasses import dataclass

from warpfix.model.facts import Event, Trace, exclusive
from warpfix.model.hazards import Touch
from warpfix.model.tapeflow import RESET_KINDS
from warpfix.model.value_reads import event_modifies, event_overwrites, event_value_reads, tape_ids

__all__ = ["ResetAfterWrite", "resets_after_writes"]


@dataclass(frozen=True)
class ResetAfterWrite:
    writer: Touch  # the recorded write whose result the reset destroys
    reset: Event
    reader: Touch  # the first recorded read after the reset


def resets_after_writes(trace: Trace) -> list[ResetAfterWrite]:
    """Every reset of ``trace`` recorded on a tape between a recorded write of its array, with no
    recorded read of that array since, and a later recorded read of it on the same tape."""
    out: list[ResetAfterWrite] = []
    written: dict[tuple[int, int], Touch] = {}  # (tape, array root) -> its last recorded writer, unread since
    pending: dict[tuple[int, int], tuple[Touch, Event]] = {}  # -> (writer, the reset after it)
    for ev in trace.events:
        if ev.kind in RESET_KINDS:
            for table in (written, pending):
                for key in [k for k in table if ev.tape is None or k[0] == ev.tape]:
                    del table[key]
            continue
        if not ev.recorded or "library" in ev.detail:
            continue
        tapes = tape_ids(ev)
        for buf, param in event_value_reads(ev):
            for tape in tapes:
                key = (tape, buf.root().id)
                hit = pending.pop(key, None)
                if hit is not None and not exclusive(hit[1], ev) and not exclusive(hit[0].event, ev):
                    out.append(ResetAfterWrite(hit[0], hit[1], Touch(ev, buf, param)))
                written.pop(key, None)
        if ev.kind in ("zero", "fill"):
            for buf in ev.writes:
                for tape in tapes:
                    key = (tape, buf.root().id)
                    writer = written.pop(key, None)
                    if writer is not None and not exclusive(writer.event, ev) and key not in pending:
                        pending[key] = (writer, ev)
            continue
        overwritten = {b.root().id for b, _ in event_overwrites(ev)}
        for buf, param in event_modifies(ev):
            for tape in tapes:
                key = (tape, buf.root().id)
                if buf.root().id in overwritten:
                    pending.pop(key, None)
                if key not in pending:
                    written[key] = Touch(ev, buf, param)
    return out
