"""WF303 write-before-backward: a write (launch, copy, zero/fill, in-place numpy) to an array recorded
on a tape, placed after the tape block but before its backward."""

from __future__ import annotations

from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model import Project
from warpfix.model.call_order import call_apart, grad_write_data, recording_of, resumed_before
from warpfix.model.facts import Event, Trace, exclusive
from warpfix.model.tapeflow import (
    DIFFERENTIABLE,
    RESET_KINDS,
    WRITES,
    anchor,
    conditional_launch,
    describe_event,
    line_ref,
    next_backward,
    outputs,
    tape_display_name,
    tape_of,
    true_reads,
)
from warpfix.rules._tape_scope_examples import KERNELS
from warpfix.rules.base import Example, Rule, RuleDoc


class WriteBeforeBackward(Rule):
    id = "WF303"
    name = "write-before-backward"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "move the write after `tape.backward(...)`"
    doc = RuleDoc(
        what=(
            "Flags a write (launch, copy, assign, `zero_`/`fill_`, in-place numpy) to an array that a tape "
            "recorded as read, placed after the recording but before that tape's backward."
        ),
        why=(
            "Backward replays the adjoints against the arrays' *current* contents: a state reset or "
            "in-place update between the recording and `tape.backward()` makes them differentiate values "
            "the forward never saw. The write is not recorded, so the overwrite tracker says nothing."
        ),
        example="""
with tape:
    wp.launch(step, dim=n, inputs=[q, v], outputs=[q_next])
    wp.launch(loss_kernel, dim=n, inputs=[q_next], outputs=[loss])
q.zero_()              # reset for the next episode, before backward
tape.backward(loss)
""",
        use_instead="""
tape.backward(loss)
q.zero_()
""",
        fix=("Safe: the backward no longer sees the write; everything after it sees the same values. When a training "
             "loop calls the writing method before the one that runs the backward (`trainer.apply()` before "
             "`trainer.backward()`), the finding is at that call, which moves after the backward's call and the "
             "loop's later gradient readers."),
    )
    VALID = [
        Example(
            KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
loss.zero_()
tape.backward(loss)
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
            note="loss is only accumulated into on the tape: its values are not replayed",
        ),
    ]
    INVALID = [
        Example(
            KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])  # expect: WF303
tape.backward(loss)
""",
            expected_fix=KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
tape.backward(loss)
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])  # expect: WF303
""",
        ),
        Example(
            KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
y.zero_()  # expect: WF303
tape.backward(loss)
""",
        ),
    ]

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        events = trace.events
        reads: dict[int, dict[int, Event]] = {}  # tape -> buffer root id -> recorded reader
        for idx, ev in enumerate(events):
            if ev.kind in RESET_KINDS and ev.tape is not None:
                reads.pop(ev.tape, None)
                continue
            tape = tape_of(ev)
            if ev.kind in WRITES:
                for other, readers in reads.items():
                    if other == tape:
                        continue
                    hit = next(
                        (
                            (b, readers[b.root().id])
                            for b in outputs(ev)
                            if b.root().id in readers and not exclusive(ev, readers[b.root().id])
                        ),
                        None,
                    )
                    if hit is None:
                        continue
                    bwd = next_backward(events, idx, other)
                    if bwd is None:
                        continue
                    buf, reader = hit
                    resumed = resumed_before(ev, bwd)
                    if resumed is not None:
                        yield self.finding(
                            resumed.at,
                            f"{resumed.opening()} runs the {describe_event(ev)}, which overwrites `{ev.name_of(buf)}`, which the "
                            f"tape read at {line_ref(reader.span, resumed.at)}, and the backward replays against the "
                            "new contents; run the backward before the yield",
                            data=resumed.data(),
                            related=((reader.span, "read on the tape here"), (bwd.span, "backward here"),
                                     (ev.span, "the write")),
                        )
                        continue
                    apart = call_apart(events, ev, bwd, recording_of(events, bwd))
                    where = apart.site if apart is not None else anchor(ev, bwd)
                    through = "" if apart is None else (
                        f"; this call runs it before the one that runs the backward "
                        f"({line_ref(apart.backward, where)}): call it after that")
                    yield self.finding(
                        where,
                        f"{describe_event(ev)} overwrites `{ev.name_of(buf)}`, which the tape read at "
                        f"{line_ref(reader.span, where)}, before that tape's backward "
                        f"({line_ref(bwd.span, where)}): backward replays the adjoints against the new "
                        f"contents; move the write after the backward{through}",
                        # the tape may not record the read (``if cfg.sort:`` in a callee): not taped
                        data={"tape": tape_display_name(bwd), "written": ev.name_of(buf),
                              **({"conditional": True} if conditional_launch(reader) else {}),
                              **(apart.data() if apart is not None else {}),
                              **grad_write_data(events, ev, bwd, {b.grad_of.root().id for b in ev.reads
                                                                 if b.grad_of is not None}, apart)},
                        related=((reader.span, "read on the tape here"), (bwd.span, "backward here"),
                                 *(((ev.span, "the write"),) if apart is not None else ())),
                    )
            if tape is not None and ev.kind in DIFFERENTIABLE:
                readers = reads.setdefault(tape, {})
                for buf in true_reads(ev):
                    first = readers.get(buf.root().id)
                    if buf.grad_of is None and (first is None or conditional_launch(first)
                                                and not conditional_launch(ev)):
                        readers[buf.root().id] = ev  # a read that surely happens is the one to report

