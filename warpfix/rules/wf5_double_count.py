"""WF5xx: double counting (checklist section 7).

Warp makes the last write to an array win in the backward pass by *consuming* the adjoint at
every store: the store's adjoint reads ``x.grad[i]`` and zeroes it, so an earlier write receives
only the gradient of the reads that happened in between. ``retain_grad=True`` switches that
zeroing off; an array written by two recorded ops then hands the same adjoint to both.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model.facts import Buffer, Event, KernelDef, Trace
from warpfix.rules.base import Example, Rule, RuleDoc
from warpfix.rules.wf1_overwrites import (
    event_modifies,
    event_overwrites,
    event_value_reads,
    overwritten_params,
    tape_ids,
)

if TYPE_CHECKING:
    from warpfix.model import Project

_RESET_KINDS = ("backward", "tape_reset")
_ARRAY_OPS = ("launch", "copy", "assign", "clone", "zero", "fill", "host_write", "call")


def _idempotent(kd: KernelDef) -> bool:
    """The kernel only stores into its outputs (no accumulation, no read-modify-write), and reads no
    array it writes: launching it twice in a row leaves the same values as launching it once."""
    written = overwritten_params(kd)
    for name, p in kd.params.items():
        if not p.is_array:
            continue
        if p.has("accum", "atomic", "rmw", "inplace_mul"):
            return False
        if name in written and p.has("read"):
            return False
    return bool(written)


def _reads_own_output(ev: Event) -> bool:
    """An output of the launch is bound to the same array as one of its inputs."""
    assert ev.kernel is not None
    written = overwritten_params(ev.kernel)
    outs = {b.id for p, b in ev.binding.items() if p in written}
    return any(b.id in outs for b, _ in event_value_reads(ev))


def _same_launch(a: Event, b: Event) -> bool:
    if a.kernel is None or a.kernel is not b.kernel or a.span == b.span:
        return False
    if set(a.arg_nodes) != set(b.arg_nodes):
        return False
    if any(ast.dump(a.arg_nodes[p]) != ast.dump(b.arg_nodes[p]) for p in a.arg_nodes):
        return False
    return {p: x.id for p, x in a.binding.items()} == {p: x.id for p, x in b.binding.items()}


def duplicate_launches(trace: Trace) -> Iterator[tuple[Event, Event]]:
    """(first, repeat) pairs: the same idempotent launch recorded twice in a row on one tape, with
    no write to the first launch's inputs in between."""
    last: dict[int, Event] = {}  # tape -> last recorded array op
    between_writes: dict[int, set[int]] = {}  # tape -> buffers written since that op
    for ev in trace.events:
        if ev.kind in _RESET_KINDS:
            if ev.tape is None:
                last.clear()
            else:
                last.pop(ev.tape, None)
            continue
        if ev.kind not in _ARRAY_OPS:
            continue
        if not ev.recorded:
            for tape in between_writes:
                between_writes[tape].update(b.id for b in ev.writes)
            continue
        for tape in tape_ids(ev):
            prev = last.get(tape)
            if (
                prev is not None
                and ev.kind == "launch"
                and prev.kind == "launch"
                and _same_launch(prev, ev)
                and ev.kernel is not None
                and _idempotent(ev.kernel)
                and not _reads_own_output(ev)
                and not between_writes.get(tape, set()) & {b.id for b, _ in event_value_reads(prev)}
            ):
                yield prev, ev
            last[tape] = ev
            between_writes[tape] = set()


def retain_spans(trace: Trace) -> dict[int, Span]:
    """Buffers that keep their gradient: ``x.retain_grad = True`` (the model's ``Buffer.retain_grad``) or
    ``retain_grad=True`` passed to the allocation (the span of the allocation call)."""
    out: dict[int, Span] = {}
    for ev in trace.events:
        if ev.kind == "alloc" and isinstance(ev.node, ast.Call):
            for kw in ev.node.keywords:
                if kw.arg == "retain_grad" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                    out.update((b.id, ev.span) for b in ev.writes)
        for buf in (*ev.reads, *ev.writes):
            if buf.retain_grad is not None:
                out.setdefault(buf.id, buf.retain_grad)
    return out


def _duplicate_spans(project: Project) -> set[Span]:
    return {rep.span for trace in project.traces for _, rep in duplicate_launches(trace)}


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

    def check(self, project: Project) -> Iterator[Finding]:
        duplicates = _duplicate_spans(project)  # a repeated launch is WF502's finding, not a second writer
        for trace in project.traces:
            retained = retain_spans(trace)
            writers: dict[
                int, dict[int, list[tuple[Event, bool]]]
            ] = {}  # tape -> buffer -> (event, overwrite)
            buffers: dict[int, Buffer] = {}
            for ev in trace.events:
                if ev.kind in _RESET_KINDS:
                    tapes = list(writers) if ev.tape is None else [ev.tape]
                    for tape in tapes:
                        yield from self._judge(writers.pop(tape, {}), buffers, retained)
                    continue
                if not ev.recorded or ev.span in duplicates:
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


class DuplicateLaunch(Rule):
    id = "WF502"
    name = "duplicate-launch"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    fix_description = "Delete the repeated launch"
    doc = RuleDoc(
        what=(
            "Flags a launch recorded twice in a row on one tape: the same kernel with the same argument "
            "expressions, bound to the same arrays, with no write to its inputs in between, where the kernel only "
            "stores into its outputs (so the repeat recomputes identical values)."
        ),
        why=(
            "The repeat does not change any forward value but doubles the adjoint work, and wherever the output "
            "adjoint is not consumed by the store (outputs with `retain_grad=True`, adjoints passed in from "
            "outside) the inputs receive the gradient twice. It is an error when an output retains its gradient, "
            "a warning otherwise."
        ),
        example="""
with tape:
    wp.launch(compute_forces, dim=n, inputs=[q, k], outputs=[f])
    wp.launch(compute_forces, dim=n, inputs=[q, k], outputs=[f])     # pasted twice
    wp.launch(integrate, dim=n, inputs=[q, v, f], outputs=[q1, v1])
""",
        use_instead="""
with tape:
    wp.launch(compute_forces, dim=n, inputs=[q, k], outputs=[f])
    wp.launch(integrate, dim=n, inputs=[q, v, f], outputs=[q1, v1])
""",
        fix="Safe: the kernel is idempotent on its outputs, so deleting the repeat leaves every value unchanged.",
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def spring_force(q: wp.array(dtype=float), k: wp.array(dtype=float), f: wp.array(dtype=float)):
    i = wp.tid()
    f[i] = -k[0] * q[i] * q[i]


@wp.kernel
def loss_kernel(f: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, f[i])


q = wp.ones(8, dtype=float)
k = wp.array([2.0], dtype=float, requires_grad=True)
f = wp.zeros(8, dtype=float, requires_grad=True, retain_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(spring_force, dim=8, inputs=[q, k], outputs=[f])
"""
    _SUFFIX = """    wp.launch(loss_kernel, dim=8, inputs=[f], outputs=[loss])
tape.backward(loss)
"""
    VALID = [
        Example(_PREFIX + _SUFFIX),
        Example(
            _PREFIX
            + """    wp.launch(loss_kernel, dim=8, inputs=[f], outputs=[loss])
    wp.launch(loss_kernel, dim=8, inputs=[f], outputs=[loss])
tape.backward(loss)
""",
            note="an accumulating kernel launched twice changes the forward value: not a redundant repeat",
        ),
    ]
    INVALID = [
        Example(
            _PREFIX
            + "    wp.launch(spring_force, dim=8, inputs=[q, k], outputs=[f])  # expect: WF502\n"
            + _SUFFIX,
            expected_fix=_PREFIX + _SUFFIX,
        )
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for trace in project.traces:
            keeps = retain_spans(trace)
            for first, repeat in duplicate_launches(trace):
                kd = repeat.kernel
                assert kd is not None
                retained = sorted(
                    repeat.name_of(b)
                    for p, b in repeat.binding.items()
                    if p in overwritten_params(kd) and b.id in keeps
                )
                message = (
                    f"kernel `{kd.name}` is launched again with the same arguments as at line {first.span.line} "
                    "and nothing it reads changed in between"
                )
                if retained:
                    message += f"; `{', '.join(retained)}` keeps its gradient, so the inputs receive it twice"
                else:
                    message += ": the repeat only doubles the adjoint work"
                yield self.finding(
                    repeat.span,
                    message,
                    severity=Severity.ERROR if retained else None,
                    related=((first.span, "first launch"),),
                )
