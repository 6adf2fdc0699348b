"""WF105 zero-fill-read: `.zero_()` / `.fill_()` on an array already read on the tape (the overwrite
tracker does not see these writes)."""

from __future__ import annotations

from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.hazards import Hazard, hazard_data, read_related
from warpfix.rules._hazard_rule import HazardRule
from warpfix.rules.base import Example, RuleDoc


class ZeroFillRead(HazardRule):
    id = "WF105"
    name = "zero-fill-read"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Allocate a fresh array instead of zeroing/filling one the tape already read"
    doc = RuleDoc(
        what="Flags `x.zero_()` / `x.fill_(v)` on the tape when `x` was already read by a recorded op of that tape.",
        why=(
            "`zero_` and `fill_` are writes that the tape does not record and the overwrite tracker does not see. "
            "The earlier reader's adjoint replays against the zeroed contents, and the gradient accumulated in "
            "`x.grad` by later steps is never consumed, so earlier steps receive it too."
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
        fix="Safe: `x = wp.zeros_like(x)` (or `wp.full_like`) has the same contents in fresh memory.",
    )
    _PREFIX = """
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
tape = wp.Tape()
with tape:
    for step in range(4):
"""
    _BODY = """        wp.launch(gravity, dim=16, inputs=[forces, q])
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=16, inputs=[q, forces], outputs=[q_new])
        q = q_new
"""
    VALID = [
        Example(_PREFIX + "        forces = wp.zeros_like(forces)\n" + _BODY),
        Example(
            _PREFIX.replace("    for step in range(4):\n", "    forces.zero_()\n    for step in range(4):\n")
            + "        forces = wp.zeros_like(forces)\n"
            + _BODY,
            note="zeroing before the first read is fine",
        ),
    ]
    INVALID = [
        Example(
            _PREFIX + "        forces.zero_()  # expect: WF105\n" + _BODY,
            expected_fix=_PREFIX + "        forces = wp.zeros_like(forces)  # expect: WF105\n" + _BODY,
        )
    ]

    def report(self, hz: Hazard) -> Iterator[Finding]:
        ev = hz.write.event
        name = hz.write.name
        call = "zero_()" if ev.kind == "zero" else "fill_(...)"
        yield self.finding(
            ev.span,
            f"`{name}.{call}` overwrites `{name}` on the tape after {hz.read.describe()} read it; the tape does "
            f"not record this write, so that adjoint replays against the new contents",
            data=hazard_data(hz),
            related=read_related(hz),
        )

