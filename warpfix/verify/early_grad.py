"""Runtime WF302 / WF304: a parameter's ``.grad`` read before the backward that produces it (part of the
probe package: relative imports only, warp and numpy).

At each backward of a tape that recorded new work since its previous backward (a fresh iteration, not
a second backward of the same recording), every operation the probe traced from the tape's first new
operation on, and every host read (``.numpy()``), is checked for a read of the gradient of one of the
tape's parameters: an array with a gradient that the tape's operations read before they write it. Such a
read sees the previous iteration's gradient (or zeros), not this one's: WF302 when it ran inside the
tape's ``with`` block (an optimizer step moved into the tape), WF304 after it, before the backward.
"""

from __future__ import annotations

from typing import Any

from .spans import SpanIndex, mem_range


class EarlyGrad:
    """Records host reads of gradients and each tape's backwards; finds reads that came too early."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        # (window, op count, path, line, array, recording tape) of each host read of a gradient
        self.host_reads: list[tuple[int, int, str, int, Any, Any]] = []
        # id(tape) -> (tape, window, op count) at its last backward
        self.last_backward: dict[int, tuple[Any, int, int]] = {}

    def on_host_read(self, arr: Any) -> None:
        """A ``.numpy()`` of ``arr`` while the window is traced."""
        if arr.requires_grad or not self.tracer.tracing():
            return  # a gradient array has no gradient of its own
        path, line = self.tracer.site()
        runtime = self.tracer.wp._src.context.runtime
        self.host_reads.append((self.tracer.window, len(self.tracer.ops), path, line, arr, runtime.tape))

    def check(self, tape: Any, since: int, frame: Any) -> None:
        """At ``tape``'s backward: report the reads of its parameters' gradients since its new recording."""
        tracer = self.tracer
        ops = tracer.ops
        now = len(ops)
        last = self.last_backward.get(id(tape))
        after = last[2] if last is not None and last[0] is tape and last[1] == tracer.window else since
        self.last_backward[id(tape)] = (tape, tracer.window, now)
        mine = [op for op in ops[max(since, after):] if op.tape is tape or op.recording is tape]
        self.host_reads = [r for r in self.host_reads if r[0] == tracer.window]
        if not mine:
            return  # no new recording: a second backward of the same work reads what the first produced
        start = mine[0].index
        # a parameter: read by the tape before any write of it there (an intermediate is written first)
        written: set[int] = set()
        params: dict[int, Any] = {}
        for op in mine:
            if op.tape is not tape:
                continue
            for info in op.reads:
                arr = info.arr
                if arr.requires_grad and arr.grad is not None and not info.is_grad and id(arr) not in written:
                    params.setdefault(id(arr), info)
            written.update(id(i.arr) for i in op.writes if id(i.arr) not in params)
        grads = SpanIndex()  # the parameters by the memory of their gradients
        for info in params.values():
            grads.add(mem_range(info.arr.grad), info)
        for op in ops[start:]:
            for read in op.reads:
                owner = next(grads.overlapping(read.span), None)
                if owner is not None:
                    self.report(owner, op.label, op.path, op.line, op.recording is tape, frame)
                    break
        for _, at, path, line, arr, recording in self.host_reads:
            # a read made with ``at`` operations traced precedes operation ``at``: at the recording's first
            # operation it came before the recording, unless it ran inside the tape's ``with`` block
            if at < start or (at == start and recording is not tape):
                continue
            owner = next(grads.overlapping(mem_range(arr)), None)
            if owner is not None:
                self.report(owner, "host read (.numpy())", path, line, recording is tape, frame)

    def report(self, owner: Any, what: str, path: str, line: int, inside: bool, frame: Any) -> None:
        self.tracer.resolve_name(owner, frame)
        rule = "WF302" if inside else "WF304"
        where = "inside the tape's `with` block" if inside else "after the tape's `with` block"
        bpath, bline = self.tracer.site()
        msg = (
            f"the {what} reads `{owner.name}.grad` {where}, before the backward at {bpath}:{bline} that produces "
            "it: it sees the previous iteration's gradient (or zeros), not this one's"
        )
        self.tracer.add_finding(rule, path, line, msg, (rule, path, line, owner.name), classified_as=rule,
                                runtime="early-grad", array=owner.name, family=owner.name)  # fmt: skip
