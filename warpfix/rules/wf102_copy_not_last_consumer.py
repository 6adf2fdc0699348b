"""WF102 copy-not-last-consumer: Warp < 1.17 only: a recorded `wp.copy`/`wp.clone`/`assign` whose
*source* is read again by a later recorded op (old copy adjoint overwrote instead of accumulating;
no tracker warning)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.facts import Buffer, Event, Trace
from warpfix.model.hazards import unresolved_element
from warpfix.model.tapeflow import forget_reset_tape
from warpfix.model.value_reads import event_value_reads, tape_ids
from warpfix.rules._overwrite_examples import KERNELS
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


class CopyNotLastConsumer(Rule):
    id = "WF102"
    name = "copy-not-last-consumer"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Replace the recorded copy with a trivial copy kernel (out[i] = src[i])"
    doc = RuleDoc(
        what=(
            "On Warp < 1.17, flags a recorded `wp.copy`, `wp.clone` or `array.assign` whose source is read again "
            "by a later recorded op of the same tape."
        ),
        why=(
            "Before Warp 1.17 the copy adjoint *overwrote* the source gradient instead of accumulating into it. "
            "Backward runs the later readers' adjoints first; the copy adjoint then replaces everything they "
            "accumulated in the source gradient. There is no forward overwrite, so the array-access tracker "
            "says nothing; the source gradient comes out exactly zero or off by a data-dependent factor."
        ),
        example="""
with tape:
    for step in range(steps):
        prev = wp.clone(q)            # source q is read again below
        q_new = wp.empty_like(q)
        wp.launch(verlet, dim=n, inputs=[q, prev, dt], outputs=[q_new])
        q = q_new
""",
        use_instead="""
@wp.kernel
def copy_vec3(src: wp.array(dtype=wp.vec3), dst: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    dst[i] = src[i]

with tape:
    for step in range(steps):
        prev = wp.empty_like(q)
        wp.launch(copy_vec3, dim=q.shape, inputs=[q], outputs=[prev])
        ...
""",
        fix=(
            "Safe: a trivial copy kernel has the same forward values and a correctly accumulating adjoint. "
            "Moving the copy after the source's last reader is the alternative."
        ),
        versions="Only Warp < 1.17 (fixed in 1.17: the copy adjoint accumulates). The rule is silent on newer Warp.",
    )
    _BUGGY = (
        KERNELS
        + """
tape = wp.Tape()
with tape:
    q_start = wp.empty_like(q)
    wp.copy(q_start, q)  # expect: WF102
    q_new = wp.empty_like(q)
    wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
    wp.launch(loss_kernel, dim=n, inputs=[q_new], outputs=[loss])
    wp.launch(loss_kernel, dim=n, inputs=[q_start], outputs=[loss])
tape.backward(loss)
"""
    )
    VALID = [
        Example(_BUGGY, note="Warp >= 1.17 accumulates in the copy adjoint"),
        Example(
            KERNELS
            + """
tape = wp.Tape()
with tape:
    q_new = wp.empty_like(q)
    wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
    q_snapshot = wp.clone(q)
    wp.launch(loss_kernel, dim=n, inputs=[q_new], outputs=[loss])
tape.backward(loss)
""",
            warp_version="1.16.0",
            note="the clone is the source's last consumer",
        ),
    ]
    INVALID = [Example(_BUGGY, warp_version="1.16.0")]

    def applies_to_warp(self, version: tuple[int, ...]) -> bool:
        return tuple(version) < (1, 17)

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        if not self.applies_to_warp(project.warp_version):
            return
        pending: dict[int, list[tuple[Event, Buffer]]] = {}  # tape -> copies not yet followed by a read
        for ev in trace.events:
            if forget_reset_tape(ev, pending):
                continue
            if not ev.recorded:
                continue
            read_ids = {buf.id for buf, _ in event_value_reads(ev)}
            for tape in tape_ids(ev):
                still = []
                for copy_ev, src in pending.get(tape, []):
                    if src.id in read_ids and copy_ev is not ev:
                        yield self._report(copy_ev, src, ev)
                    else:
                        still.append((copy_ev, src))
                pending[tape] = still
            if (
                ev.kind in ("copy", "clone", "assign")
                and ev.reads
                and not unresolved_element(ev.reads[0])
            ):
                for tape in tape_ids(ev):
                    pending.setdefault(tape, []).append((ev, ev.reads[0]))

    def _report(self, copy_ev: Event, src: Buffer, reader: Event) -> Finding:
        name = copy_ev.name_of(src)
        what = f"kernel `{reader.kernel.name}`" if reader.kernel is not None else f"`{reader.kind}`"
        data = {"src": name}
        if copy_ev.kind != "clone" and copy_ev.writes:  # a clone's destination is the assignment target
            data["dst"] = copy_ev.name_of(copy_ev.writes[0])
        return self.finding(
            copy_ev.span,
            f"recorded {copy_ev.kind} of `{name}` is not its last consumer: {what} reads `{name}` again at line "
            f"{reader.span.line}; on Warp < 1.17 the copy adjoint overwrites `{name}.grad` and discards that "
            "reader's gradient",
            data=data,
            related=((reader.span, f"`{name}` read again here"),),
        )
