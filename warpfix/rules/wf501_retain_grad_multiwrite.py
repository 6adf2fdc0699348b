"""WF501 retain-grad-multiwrite: `arr.retain_grad = True` (or `retain_grad=True`) on an array written
by more than one recorded op: disables the zeroing that makes the last write win, so adjoints are
counted twice."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model.duplicate_launches import trace_duplicates, trace_retained
from warpfix.model.facts import Buffer, Event, Trace
from warpfix.model.tapeflow import RESET_KINDS
from warpfix.model.value_reads import event_modifies, event_overwrites, tape_ids
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


class RetainGradMultiwrite(Rule):
    id = "WF501"
    name = "retain-grad-multiwrite"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Drop retain_grad on an array that more than one recorded op writes"
    doc = RuleDoc(
        what=(
            "Flags `arr.retain_grad = True` (or `retain_grad=True` at the allocation) on an array that more than "
            "one recorded op of a tape writes, where a later write overwrites (stores into) it."
        ),
        why=(
            "A store's adjoint normally consumes `arr.grad` so that only the last write receives the gradient of "
            "the final value. `retain_grad` disables that consumption: the earlier write receives the later "
            "write's adjoint as well, and the gradient is counted twice (or flows into values that were "
            "overwritten)."
        ),
        example="""
u = wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True)   # to inspect u.grad
with tape:
    wp.launch(diffuse, dim=n, inputs=[u0, kappa], outputs=[u])
    wp.launch(apply_dirichlet, dim=2, inputs=[u, left, right])        # overwrites u[0], u[n-1]
    wp.launch(loss_kernel, dim=n, inputs=[u], outputs=[loss])
""",
        use_instead="""
u = wp.zeros(n, dtype=float, requires_grad=True)
""",
        fix=(
            "Safe: forward values do not depend on `retain_grad`. If the gradient of the intermediate must be "
            "inspected, read it from a separate array written once."
        ),
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def diffuse(u0: wp.array(dtype=float), kappa: wp.array(dtype=float), u: wp.array(dtype=float)):
    i = wp.tid()
    u[i] = u0[i] * wp.exp(-kappa[0])


@wp.kernel
def dirichlet(u: wp.array(dtype=float), value: float):
    u[0] = value


@wp.kernel
def loss_kernel(u: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, u[i] * u[i])


u0 = wp.ones(32, dtype=float)
kappa = wp.array([0.5], dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""
    _TAPE = """tape = wp.Tape()
with tape:
    wp.launch(diffuse, dim=32, inputs=[u0, kappa], outputs=[u])
    wp.launch(dirichlet, dim=1, inputs=[u, 0.0])
    wp.launch(loss_kernel, dim=32, inputs=[u], outputs=[loss])
tape.backward(loss)
"""
    VALID = [
        Example(_PREFIX + "u = wp.zeros(32, dtype=float, requires_grad=True)\n" + _TAPE),
        Example(
            _PREFIX
            + """u = wp.zeros(32, dtype=float, requires_grad=True)
u.retain_grad = True
tape = wp.Tape()
with tape:
    wp.launch(diffuse, dim=32, inputs=[u0, kappa], outputs=[u])
    wp.launch(loss_kernel, dim=32, inputs=[u], outputs=[loss])
tape.backward(loss)
""",
            note="written once: retain_grad is safe",
        ),
    ]
    INVALID = [
        Example(
            _PREFIX
            + "u = wp.zeros(32, dtype=float, requires_grad=True, retain_grad=True)  # expect: WF501\n"
            + _TAPE,
            expected_fix=_PREFIX
            + "u = wp.zeros(32, dtype=float, requires_grad=True)  # expect: WF501\n"
            + _TAPE,
        ),
        Example(
            _PREFIX
            + "u = wp.zeros(32, dtype=float, requires_grad=True)\nu.retain_grad = True  # expect: WF501\n"
            + _TAPE,
            expected_fix=_PREFIX + "u = wp.zeros(32, dtype=float, requires_grad=True)\n" + _TAPE,
        ),
    ]

    def begin(self, project: Project) -> None:
        # a repeated launch is WF502's finding, not a second writer: the repeats of every trace count
        self._duplicates: set[Span] = set()
        # traces with a retained gradient: their retained buffers, and their resets and recorded writes
        self._candidates: list[tuple[dict[int, Span], list[Event]]] = []

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        self._duplicates.update(rep.span for _, rep in trace_duplicates(trace))
        retained = trace_retained(trace)
        if retained:
            kept = [ev for ev in trace.events if ev.kind in RESET_KINDS
                    or (ev.recorded and any(b.id in retained for b, _ in event_modifies(ev)))]
            self._candidates.append((retained, kept))
        return iter(())

    def check_project(self, project: Project) -> Iterator[Finding]:
        for retained, events in self._candidates:
            yield from self._check_events(retained, events)

    def _check_events(self, retained: dict[int, Span], events: list[Event]) -> Iterator[Finding]:
        writers: dict[int, dict[int, list[tuple[Event, bool]]]] = {}  # tape -> buffer -> (event, overwrite)
        buffers: dict[int, Buffer] = {}
        for ev in events:
            if ev.kind in RESET_KINDS:
                tapes = list(writers) if ev.tape is None else [ev.tape]
                for tape in tapes:
                    yield from self._judge(writers.pop(tape, {}), buffers, retained)
                continue
            if not ev.recorded or ev.span in self._duplicates:
                continue
            over = {b.id for b, _ in event_overwrites(ev)}
            for buf, _ in event_modifies(ev):
                if buf.id not in retained:
                    continue
                buffers[buf.id] = buf
                for tape in tape_ids(ev):
                    writers.setdefault(tape, {}).setdefault(buf.id, []).append((ev, buf.id in over))
        for per_tape in writers.values():
            yield from self._judge(per_tape, buffers, retained)

    def _judge(
        self,
        per_tape: dict[int, list[tuple[Event, bool]]],
        buffers: dict[int, Buffer],
        retained: dict[int, Span],
    ) -> Iterator[Finding]:
        for buf_id, events in per_tape.items():
            if len(events) < 2 or not any(over for _, over in events[1:]):
                continue
            buf = buffers[buf_id]
            first = events[0][0]
            later = next(ev for ev, over in events[1:] if over)
            name = first.name_of(buf)

            def what(ev: Event) -> str:
                return f"kernel `{ev.kernel.name}`" if ev.kind == "launch" and ev.kernel else f"`{ev.kind}`"

            yield self.finding(
                retained[buf_id],
                f"`{name}` keeps its gradient (retain_grad) but is written by {what(first)} at line "
                f"{first.span.line} and overwritten by {what(later)} at line {later.span.line} on the same "
                "tape: the earlier write also receives the later write's adjoint",
                related=(
                    (first.span, f"`{name}` written here"),
                    (later.span, f"`{name}` overwritten here"),
                ),
            )
