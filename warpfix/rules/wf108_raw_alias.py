"""WF108 raw-alias: `wp.array(ptr=x.ptr, ...)` (or similar zero-copy view) of a taped array that is
written before backward."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.facts import Buffer, Event, Trace, exclusive
from warpfix.model.hazards import Touch, unresolved_element
from warpfix.model.tapeflow import conditional_launch, forget_reset_tape, line_ref, next_backward
from warpfix.model.value_reads import event_overwrites, event_sensitive_reads, tape_ids
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


class RawAlias(Rule):
    id = "WF108"
    name = "raw-alias"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = (
        "Write into wp.clone(x) instead of a zero-copy view, or move the mutation after backward"
    )
    doc = RuleDoc(
        what=(
            "Flags a write, before the tape's backward, through a zero-copy view (`wp.array(ptr=x.ptr, ...)`) of "
            "an array that a recorded op read (or a write to the array while a view of it was read)."
        ),
        why=(
            "The view shares memory with the taped array but is a different Python object: neither the tape nor "
            "the overwrite tracker connects the two, and the recorded op's adjoint replays against the mutated "
            "memory."
        ),
        example="""
with tape:
    wp.launch(step, dim=n, inputs=[q], outputs=[q_new])
    wp.launch(loss_kernel, dim=n, inputs=[q_new], outputs=[loss])
q_view = wp.array(ptr=q.ptr, shape=q.shape, dtype=q.dtype, device=q.device)
q_view.zero_()                        # mutates q before backward
tape.backward(loss)
""",
        use_instead="""
q_view = wp.clone(q)
q_view.zero_()
tape.backward(loss)
""",
        fix="Safe: the clone has the same contents; only the aliasing disappears.",
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def step(q: wp.array(dtype=float), q_new: wp.array(dtype=float)):
    i = wp.tid()
    q_new[i] = q[i] * q[i]


@wp.kernel
def loss_kernel(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i])


q = wp.full(16, 0.5, dtype=float, requires_grad=True)
q_new = wp.zeros(16, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(step, dim=16, inputs=[q], outputs=[q_new])
    wp.launch(loss_kernel, dim=16, inputs=[q_new], outputs=[loss])
"""
    VALID = [
        Example(
            _PREFIX
            + """tape.backward(loss)
q_view = wp.array(ptr=q.ptr, shape=q.shape, dtype=q.dtype, device=q.device)
q_view.zero_()
"""
        ),
        Example(
            _PREFIX
            + """q_view = wp.clone(q)
q_view.zero_()
tape.backward(loss)
"""
        ),
    ]
    INVALID = [
        Example(
            _PREFIX
            + """q_view = wp.array(ptr=q.ptr, shape=q.shape, dtype=q.dtype, device=q.device)
q_view.zero_()  # expect: WF108
tape.backward(loss)
""",
            expected_fix=_PREFIX
            + """q_view = wp.clone(q)
q_view.zero_()  # expect: WF108
tape.backward(loss)
""",
        )
    ]

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        live: dict[int, dict[int, Touch]] = {}  # tape -> root buffer id -> first recorded read
        for idx, ev in enumerate(trace.events):
            if forget_reset_tape(ev, live):
                continue
            writes = event_overwrites(ev)
            if ev.kind == "host_write":
                writes = [(b, None) for b in ev.writes]
            for buf, _param in writes:
                if unresolved_element(buf):
                    continue
                for tape, reads in live.items():
                    earlier = reads.get(buf.root().id)
                    if earlier is None or earlier.buffer.id == buf.id or earlier.event is ev:
                        continue
                    if buf.view_of is None and earlier.buffer.view_of is None:
                        continue
                    if exclusive(ev, earlier.event):
                        continue
                    bwd = next_backward(trace.events, idx, tape)
                    if bwd is None:  # no backward replays the read after this write
                        continue
                    yield self._report(ev, buf, earlier, bwd)
                    break
            if ev.recorded:
                for buf, param in event_sensitive_reads(ev):
                    for tape in tape_ids(ev):
                        live.setdefault(tape, {}).setdefault(buf.root().id, Touch(ev, buf, param))

    def _report(self, ev: Event, buf: Buffer, earlier: Touch, bwd: Event) -> Finding:
        name = ev.name_of(buf)
        view = buf if buf.view_of is not None else earlier.buffer
        base = view.root()
        related = [(earlier.event.span, f"`{earlier.name}` read here by {earlier.describe()}")]
        if view.origin is not None:
            related.append((view.origin, f"`{view.label}` created here as a view of `{base.label}`"))
        related.append((bwd.span, "backward here"))
        data: dict[str, object] = {"view": name} if view is buf else {}
        if conditional_launch(earlier.event):  # the tape may not record the read (``if cfg.x:`` in a callee)
            data["conditional"] = True
        return self.finding(
            ev.span,
            f"`{name}` shares memory with `{earlier.name}`, which {earlier.describe()} read on the tape; this "
            f"write happens before the backward ({line_ref(bwd.span, ev.span)}) and neither the tape nor the "
            "overwrite tracker sees the alias",
            data=data,
            related=tuple(related),
        )
