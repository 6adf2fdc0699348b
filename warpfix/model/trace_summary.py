"""What the project-wide analyses keep of the host traces: a few sets and flags, not the events.

The engine streams the traces (one root at a time, dropped once the rules have seen it); the
analyses that need every trace at once (which kernels a tape records, which host lines run taped,
whether the program records anything) read this summary instead, filled in as the traces pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warpfix.model.facts import Event, KernelDef, Trace
from warpfix.model.tapeflow import RESET_KINDS

TAPE_OPS = frozenset({"tape_begin", "tape_end", "backward", "tape_zero", "tape_reset"})


@dataclass
class TraceSummary:
    # the kernels of launches recorded on a tape, by id (the roots of the tape reach)
    recorded_kernels: dict[int, KernelDef] = field(default_factory=dict)
    # (path, name) of kernels with an unconditional recorded launch (a kernel finding's taped verdict)
    taped_launches: set[tuple[str, str]] = field(default_factory=set)
    any_recorded: bool = False  # some event is recorded on a tape
    host_lines: dict[tuple[str, int], bool] = field(default_factory=dict)  # (path, line) -> taped at some run
    # (path, first line, last line) of spans already marked, at all / as taped: marking is an "or",
    # so a span marked again (a call site in the stack of each of its events) changes nothing
    marked: set[tuple[str, int, int]] = field(default_factory=set)
    marked_taped: set[tuple[str, int, int]] = field(default_factory=set)

    def add(self, trace: Trace) -> None:
        """Take in one trace (in trace order)."""
        for ev in trace.events:
            if ev.kind == "launch" and ev.recorded and ev.kernel is not None:
                self.recorded_kernels.setdefault(id(ev.kernel), ev.kernel)
                if not ev.detail.get("conditional"):
                    self.taped_launches.add((ev.kernel.path, ev.kernel.name))
        self._mark_lines(trace.events)

    @property
    def recording(self) -> tuple[bool, bool]:
        """Whether a launch is recorded on a tape, and whether anything is."""
        return bool(self.recorded_kernels), self.any_recorded

    def _mark_lines(self, events: list[Event]) -> None:
        """Each host line an event (or a call on its stack) runs at, taped when the event is
        recorded, is a tape operation, or runs between a recording's end and that tape's backward."""
        pending: set[int] = set()  # tapes whose recording ended and whose backward has not run yet
        recorded_by: set[int] = set()
        for ev in events:
            taped = ev.recorded or ev.kind in TAPE_OPS or bool(pending)
            if ev.recorded:
                self.any_recorded = True
                recorded_by.update(s.tape for s in ev.tapes)
            if ev.kind == "tape_end" and ev.tape in recorded_by:
                pending.add(ev.tape)  # type: ignore[arg-type]
            elif ev.kind in RESET_KINDS and ev.tape is not None:
                pending.discard(ev.tape)
            done = self.marked_taped if taped else self.marked
            for span in (ev.span, *ev.call_stack):
                lines = (span.path, span.line, span.end_line)
                if lines in done:
                    continue
                self.marked.add(lines)
                if taped:
                    self.marked_taped.add(lines)
                for line in range(span.line, min(span.end_line, span.line + 200) + 1):
                    key = (span.path, line)
                    self.host_lines[key] = self.host_lines.get(key, False) or taped
