"""Runtime WF601: a backward whose tape does not cover every recorded operation its objective depends on
(part of the probe package: relative imports only, warp and numpy).

At each backward the objective's provenance is followed back through the window's operations: for every
array a step reads, the latest operation before it that wrote that memory. A writer the backward's tape
holds (its recording since its last reset, or a custom adjoint ``tape.record_func`` put on it: its arrays
taken as connected to each other, as in :mod:`.cut_chain`) is followed further. A writer recorded on a
*different* recording (another tape, or this tape before its reset) that read an array with a gradient is
a link the backward cannot cross: the objective is truncated there, unless that other recording is
backwarded later while it still holds the operation (segments backwarded in reverse, each seeded with the
gradients the next segment's backward left at the boundary). Links still open when the window ends are
reported at the launch's line, one finding per launch (each frame it ran for counted once), with the
first backward it truncates.

Operations recorded on no tape are followed but never reported: a state carried into the next window by
an unrecorded ``wp.clone`` is a constant to the backward, and the link is the recorded launch that
computed it. Work that no tape ever recorded is not reported either: checkpointed programs run their
forward so, restore each segment's start by unrecorded copies and carry its gradient by hand.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from .spans import mem_range, overlap


@dataclass(eq=False)
class Link:
    """An operation outside a backward's tape that the backward's objective depends on."""

    op: Any
    array: str  # the name of what it wrote that the objective reads
    backward: str  # "path:line" of the backward it truncates


class TapeCover:
    """Follows each backward's objective back through the window; reports the links outside its tape."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.links: list[Link] = []
        self.backwarded: dict[int, list[int]] = {}  # id(tape) -> op counts at its backwards in the window

    def check(self, tape: Any, outputs: list[Any], frame: Any) -> None:
        """At ``tape``'s backward of ``outputs`` (its seeded arrays): keep the links its objective crosses."""
        tracer = self.tracer
        now = len(tracer.ops)
        since = tracer.tape_since.get(id(tape), 0)
        # this backward replays what its recording holds: links recorded there are covered after all
        self.links = [k for k in self.links if not (k.op.tape is tape and k.op.index >= since)]
        self.backwarded.setdefault(id(tape), []).append(now)
        held = tracer.cut_chain.funcs.get(id(tape))
        adjoints = [(at, arrays) for w, at, arrays in held[1] if w == tracer.window and at >= since] if (
            held is not None and held[0] is tape) else []
        path, line = tracer.site()
        work = [(mem_range(a), now) for a in outputs]
        done: set[float] = set()
        while work:
            span, before = work.pop()
            at, op, arrays = self.writer(span, before, adjoints)
            if at is None or at in done:
                continue
            done.add(at)
            if op is None:  # a custom adjoint of this tape: its arrays are connected both ways
                work += [(mem_range(a), int(at + 0.5)) for a in arrays]
                continue
            reads = [i for i in op.reads if not i.is_grad]
            if op.tape is not None and (op.tape is not tape or op.index < since):
                if not any(i.arr.grad is not None for i in reads):
                    continue  # computed from values without gradients: nothing to truncate
                info = next((w for w in op.writes if overlap(w.span, span)), op.writes[0])
                tracer.resolve_name(info, frame)
                self.links.append(Link(op, info.name, f"{path}:{line}"))
            work += [(i.span, op.index) for i in reads]

    def writer(self, span: Any, before: int,
               adjoints: list[tuple[int, list[Any]]]) -> tuple[float | None, Any, list[Any]]:
        """(index, op, []) of the latest write of ``span`` before op ``before``; (index - 0.5, None, its arrays)
        when that is a custom adjoint of the tape (recorded after the operations before it); (None, None, [])
        when nothing wrote it."""
        best: int | None = None
        for info in self.tracer.spans.overlapping(span):
            i = bisect.bisect_left(info.writes_at, before) - 1
            if i >= 0 and (best is None or info.writes_at[i] > best):
                best = info.writes_at[i]
        for at, arrays in reversed(adjoints):
            if at <= before and (best is None or at > best) and any(overlap(mem_range(a), span) for a in arrays):
                return at - 0.5, None, arrays
        return (None, None, []) if best is None else (best, self.tracer.ops[best], [])

    def settle(self) -> None:
        """At the end of the window: report the links no later backward covered."""
        tracer = self.tracer
        seen: set[int] = set()
        for link in self.links:
            op = link.op
            if op.index in seen:
                continue  # a launch the objectives of several backwards depend on: one truncation
            seen.add(op.index)
            if tracer.tape_since.get(id(op.tape), 0) > op.index:
                how = "a tape that was reset afterwards"
            elif any(b > op.index for b in self.backwarded.get(id(op.tape), [])):
                how = "another tape, backwarded on its own before"
            else:
                how = "another tape, never backwarded"
            msg = (
                f"the {op.label} writes `{link.array}`, which the objective of the backward at {link.backward} "
                f"depends on, but it was recorded on {how}: that backward stops at `{link.array}`, so the "
                "gradient misses every path from the parameters through this launch (a truncated objective: "
                "one tape must record every frame the loss depends on)"
            )
            tracer.add_finding("WF601", op.path, op.line, msg, ("WF601", op.path, op.line, op.label),
                               classified_as="WF601", library=op.library, runtime="tape-cover",
                               array=link.array, family=op.label, backward=link.backward)  # fmt: skip
        self.links = []
        self.backwarded = {}
