"""WF105 zero-fill-read: `.zero_()` / `.fill_()` on an array already read on the tape (the overwrite
tracker does not see these writes)."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model.dead_reset import covering_reset, is_reset, merge_successors, reset_successors
from warpfix.model.hazards import Hazard, hazard_data, read_related
from warpfix.model.reset_after_write import resets_after_writes
from warpfix.model.reset_era import reset_era, unstored_reader
from warpfix.rules._hazard_rule import HazardRule
from warpfix.rules.base import Example, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project
    from warpfix.model.facts import Trace


_FORCES = """
import warp as wp


@wp.kernel
def gravity(f: wp.array(dtype=float), q: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(f, i, -9.8 - q[i] * q[i])


@wp.kernel
def integrate(q: wp.array(dtype=float), f: wp.array(dtype=float), q_new: wp.array(dtype=float)):
    i = wp.tid()
    q_new[i] = q[i] + 0.01 * f[i]


q = wp.zeros(16, dtype=float, requires_grad=True)
forces = wp.zeros(16, dtype=float, requires_grad=True)
"""
_WRITTEN = _FORCES + """q_new = wp.zeros(16, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(gravity, dim=16, inputs=[forces, q])
    RESET
    wp.launch(integrate, dim=16, inputs=[q, forces], outputs=[q_new])
tape.backward(grads={q_new: wp.ones(16, dtype=float)})
"""
_DEAD = """
import warp as wp


@wp.kernel
def accumulate(a: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, a[i])


@wp.kernel
def square(total: wp.array(dtype=float), loss: wp.array(dtype=float)):
    loss[0] = total[0] * total[0]


class Sim:
    def __init__(self):
        self.a = wp.ones(8, dtype=float, requires_grad=True)
        self.total = wp.zeros(1, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        with wp.ScopedCapture() as capture:
            self.run()
        self.graph = capture.graph

    def run(self):
        self.tape = wp.Tape()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)

    def forward(self):
        self.total.zero_()
        wp.launch(accumulate, dim=8, inputs=[self.a, self.total])
        wp.launch(square, dim=1, inputs=[self.total], outputs=[self.loss])
        self.total.zero_()  # expect: WF105
"""


class ZeroFillRead(HazardRule):
    id = "WF105"
    name = "zero-fill-read"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = (
        "Allocate a fresh array instead of zeroing/filling one the tape already read; where the array cannot be "
        "rebound (a graph capture), its readers read a copy, or a reset nothing but the backward sees goes"
    )
    doc = RuleDoc(
        what=(
            "Flags `x.zero_()` / `x.fill_(v)` on the tape when `x` was already read by a recorded op of that tape, "
            "or when a recorded op wrote `x` and a later recorded op reads the reset contents."
        ),
        why=(
            "`zero_` and `fill_` are writes that the tape does not record and the overwrite tracker does not see. "
            "The earlier reader's adjoint replays against the zeroed contents, and the gradient accumulated in "
            "`x.grad` by later steps is never consumed, so earlier steps receive it too. A reset between a recorded "
            "write and a recorded read leaves the tape holding the writer: the reader's adjoint credits it with "
            "values the reader never saw."
        ),
        example="""
with tape:
    for step in range(steps):
        forces.zero_()
        wp.launch(spring_forces, dim=m, inputs=[q, springs], outputs=[forces])
        wp.launch(integrate, dim=n, inputs=[q, v, forces, dt], outputs=[q_new, v_new])
        q, v = q_new, v_new
""",
        use_instead="""
with tape:
    for step in range(steps):
        forces = wp.zeros_like(forces)
        wp.launch(spring_forces, dim=m, inputs=[q, springs], outputs=[forces])
        ...
""",
        fix=(
            "Safe: `x = wp.zeros_like(x)` (or `wp.full_like`) has the same contents in fresh memory. Where `x` "
            "cannot be rebound (code a graph capture runs: a replay never reruns the rebinding), each reader of the "
            "destroyed values reads a recorded copy instead, `inputs=[wp.clone(x), ...]`, and the reset stays: "
            "offered only when every reader is a launch of the project's code and nothing on the tape touches `x` "
            "after the reset (a later access would share `x.grad` with the reads before it). Else a reset whose "
            "contents nothing reads (the method resets `self.x` again on every call before using it, and nothing "
            "else in the project uses `x`) is deleted."
        ),
    )
    _PREFIX = _FORCES + """tape = wp.Tape()
with tape:
    for step in range(4):
"""
    _BODY = """        wp.launch(gravity, dim=16, inputs=[forces, q])
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=16, inputs=[q, forces], outputs=[q_new])
        q = q_new
"""
    _CAPTURED = """
import warp as wp


@wp.kernel
def scale(a: wp.array(dtype=float), x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = 2.0 * a[i]


@wp.kernel
def square_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


class Sim:
    def __init__(self):
        self.a = wp.ones(8, dtype=float, requires_grad=True)
        self.x = wp.zeros(8, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        with wp.ScopedCapture() as capture:
            self.run()
        self.graph = capture.graph

    def run(self):
        self.tape = wp.Tape()
        with self.tape:
            wp.launch(scale, dim=8, inputs=[self.a], outputs=[self.x])
            wp.launch(square_sum, dim=8, inputs=[self.x], outputs=[self.loss])
            self.x.zero_()  # expect: WF105
        self.tape.backward(self.loss)
"""
    VALID = [
        Example(_PREFIX + "        forces = wp.zeros_like(forces)\n" + _BODY),
        Example(
            _CAPTURED.replace("inputs=[self.x]", "inputs=[wp.clone(self.x)]"),
            note="only a copy read `x` before the reset and nothing touches it after: a copy's adjoint needs no value",
        ),
        Example(
            _PREFIX.replace("    for step in range(4):\n", "    forces.zero_()\n    for step in range(4):\n")
            + "        forces = wp.zeros_like(forces)\n"
            + _BODY,
            note="zeroing before the first read is fine",
        ),
        Example(
            _WRITTEN.replace("    wp.launch(gravity, dim=16, inputs=[forces, q])\n    RESET\n",
                             "    forces.zero_()\n    wp.launch(gravity, dim=16, inputs=[forces, q])\n"),
            note="a reset before the accumulation: no recorded write is destroyed",
        ),
    ]
    INVALID = [
        Example(
            _PREFIX + "        forces.zero_()  # expect: WF105\n" + _BODY,
            expected_fix=_PREFIX + "        forces = wp.zeros_like(forces)  # expect: WF105\n" + _BODY,
        ),
        Example(
            _CAPTURED,
            expected_fix=_CAPTURED.replace("inputs=[self.x]", "inputs=[wp.clone(self.x)]"),
            note="a capture runs the reset, so `self.x` is not rebound: the loss reads a snapshot instead",
        ),
        Example(
            _WRITTEN.replace("    RESET\n", "    forces.zero_()  # expect: WF105\n"),
            expected_fix=_WRITTEN.replace("    RESET\n", "    forces = wp.zeros_like(forces)  # expect: WF105\n"),
            note="nothing read `forces` before the reset, but `integrate` reads the zeros while the tape holds "
            "`gravity` as their writer: its adjoint gets `forces.grad`",
        ),
        Example(
            _DEAD,
            expected_fix=_DEAD.replace("        self.total.zero_()  # expect: WF105\n", ""),
            note="a capture runs the reset and the loss reads an accumulation, so neither a fresh array nor a "
            "snapshot applies; `forward()` resets `self.total` before it uses it, so the reset after the loss is dead",
        ),
    ]

    def begin(self, project: Project) -> None:
        super().begin(project)
        # span -> (the first finding there, the snapshot sites of every hazard there, the first refusal)
        self._found: dict[Span, tuple[Finding, list[list[object]], str | None]] = {}
        # each reset's next toucher in every trace: is it an unconditional reset (dead_reset)
        self._successors: dict[Span, tuple[bool, int | None]] = {}

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        merge_successors(self._successors, reset_successors(trace))
        yield from super().check_trace(project, trace)
        for hit in resets_after_writes(trace):
            if hit.reset.span in self._found:
                continue
            name = hit.reset.name_of(hit.reset.writes[0])
            call = "zero_()" if hit.reset.kind == "zero" else "fill_(...)"
            finding = self.finding(
                hit.reset.span,
                f"`{name}.{call}` overwrites `{name}`, which {hit.writer.describe()} wrote on the tape, before "
                f"{hit.reader.describe()} reads it; the tape does not record this write, so the reader's adjoint "
                "credits the writer with values it never produced",
                related=((hit.writer.event.span, f"`{name}` written here by {hit.writer.describe()}"),
                         (hit.reader.event.span, f"`{name}` read here by {hit.reader.describe()}")),
            )
            self._found[hit.reset.span] = (finding, [], f"no recorded op read `{name}` before the reset")

    def check_project(self, project: Project) -> Iterator[Finding]:
        """Every finding, once all hazards at its reset are known: one code edit serves them all, so
        the snapshot is offered only when it is exact for each."""
        yield from super().check_project(project)  # notes the untaped hazards
        for finding, sites, refused in self._found.values():
            extra = {"snapshot_refused": refused, **self._dead(project, finding.span)} if refused \
                else {"snapshot": sites}
            yield dataclasses.replace(finding, data={**finding.data, **extra})

    def _dead(self, project: Project, span: Span) -> dict[str, object]:
        """``covering_reset``: the line of the reset that makes this one dead, or why it is not."""
        src = project.files.get(span.path)
        call = None if src is None else next(
            (c for c in src.nodes_of(ast.Call) if c.lineno == span.line and is_reset(c)), None)
        if src is None or call is None:
            return {"dead_refused": "no reset statement at the finding"}
        ok, followed = self._successors.get(span, (False, None))
        line, why = covering_reset(project.files, src, call, followed if ok else None)
        return {"dead_after": line} if line is not None else {"dead_refused": why}

    def report(self, hz: Hazard) -> Iterator[Finding]:
        """Notes the hazard; its finding is reported by :meth:`check_project`."""
        self.note(hz)
        return iter(())

    def note(self, hz: Hazard) -> None:
        ev = hz.write.event
        name = hz.write.name
        era = reset_era(hz.trace, hz.position, hz.write.buffer)
        if era.copies_only:
            return  # only copies read what the reset destroys, and nothing on the tape follows it
        refused = era.snapshot_refusal(name)
        if refused is None and (other := unstored_reader(hz.trace, era)) is not None:
            called = f" (called at line {other.call_stack[-1].line})" if other.call_stack else ""
            refused = (f"the launch at line {other.span.line} also runs{called} on an array no recorded store wrote "
                       "on its tape: a copy (`wp.clone`) would take over the gradient it holds then and count it twice")
        known = self._found.get(ev.span)
        if known is None:
            call = "zero_()" if ev.kind == "zero" else "fill_(...)"
            finding = self.finding(
                ev.span,
                f"`{name}.{call}` overwrites `{name}` on the tape after {hz.read.describe()} read it; the tape does "
                f"not record this write, so that adjoint replays against the new contents",
                data=hazard_data(hz),
                related=read_related(hz),
            )
            self._found[ev.span] = (finding, [] if refused else era.snapshot_sites(), refused)
            return
        finding, sites, earlier = known
        if earlier or refused:
            self._found[ev.span] = (finding, sites, earlier or refused)
        else:
            sites.extend(s for s in era.snapshot_sites() if s not in sites)
