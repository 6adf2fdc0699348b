"""The state of each parameter's ``.grad`` along a host trace (backward, consumed, zeroed), as the
WF3xx tape-lifecycle rules walk it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from warpfix.model.facts import Buffer, Event, Trace
from warpfix.model.tapeflow import DIFFERENTIABLE, tape_of, true_reads


@dataclass
class _GradState:
    """What ``owner.grad`` holds while walking a trace."""

    backward: Event | None = None  # the last backward that accumulated into it
    consumed: Event | None = None  # a read of it after that backward
    zeroed: Event | None = None  # a tape.zero()/reset() that cleared it after that backward
    tapes: set[int] = field(default_factory=set)  # tapes whose backward registered it


@dataclass
class _Recording:
    """What one tape has recorded since it was created or reset."""

    read: dict[int, Buffer] = field(default_factory=dict)
    written: set[int] = field(default_factory=set)

    def add(self, ev: Event) -> None:
        for buf in true_reads(ev):
            root = buf.root()
            if root.requires_grad and root.grad_of is None:
                self.read.setdefault(root.id, root)
        self.written.update(b.root().id for b in ev.writes)

    def leaves(self) -> set[int]:
        return {k for k in self.read if k not in self.written}


def walk_grads(trace: Trace) -> Iterator[tuple[int, Event, dict[int, _GradState], dict[int, _Recording]]]:
    """Walk the trace keeping, per parameter, the state of its ``.grad``; yields before each event
    ``(index, event, states, recordings)`` where ``recordings[tape].leaves()`` are the parameters that
    tape's next backward will accumulate into (empty right after a backward)."""
    states: dict[int, _GradState] = {}
    recordings: dict[int, _Recording] = {}
    pending: dict[int, _Recording] = {}  # recorded since the tape's last backward
    for idx, ev in enumerate(trace.events):
        tape = tape_of(ev)
        if tape is not None and ev.kind in DIFFERENTIABLE:
            recordings.setdefault(tape, _Recording()).add(ev)
            pending.setdefault(tape, _Recording()).add(ev)
        yield idx, ev, states, pending
        if ev.kind == "backward" and ev.tape is not None:
            for pid in recordings[ev.tape].leaves() if ev.tape in recordings else ():
                st = states.setdefault(pid, _GradState())
                st.backward, st.consumed, st.zeroed = ev, None, None
                st.tapes.add(ev.tape)
            pending.pop(ev.tape, None)
        elif ev.kind in ("tape_zero", "tape_reset") and ev.tape is not None:
            for st in states.values():
                if ev.tape in st.tapes and st.backward is not None:
                    st.zeroed, st.consumed = ev, None
            if ev.kind == "tape_reset":
                recordings.pop(ev.tape, None)
                pending.pop(ev.tape, None)
        elif ev.kind == "capture_launch":  # a replayed backward the model did not follow: state unknown
            for st in states.values():
                st.backward, st.consumed, st.zeroed = None, None, None
        elif ev.kind == "grad_zero":
            for buf in ev.writes:
                if buf.grad_of is not None and buf.grad_of.root().id in states:
                    st = states[buf.grad_of.root().id]
                    st.backward, st.consumed, st.zeroed = None, None, None
        for buf in ev.reads:
            if buf.grad_of is not None and ev.kind != "grad_zero":
                st = states.get(buf.grad_of.root().id)
                if (
                    st is not None
                    and st.backward is not None
                    and st.consumed is None
                    and ev.kind != "backward"
                ):
                    st.consumed = ev
