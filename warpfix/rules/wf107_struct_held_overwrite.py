"""WF107 struct-held-overwrite: the same as WF101/WF106 for arrays held inside a `@wp.struct` (the
overwrite tracker is blind to these)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.hazards import hazard_data, read_related
from warpfix.model.value_reads import rmw_store_spans
from warpfix.rules._kernel_rmw import KernelRmwRule
from warpfix.rules.base import Example, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


class StructHeldOverwrite(KernelRmwRule):
    id = "WF107"
    name = "struct-held-overwrite"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Write to a new array field/argument and rebind it at the launch sites"
    struct_fields = True
    doc = RuleDoc(
        what=(
            "The WF101/WF106 patterns for arrays held in a `@wp.struct`: a taped kernel that reads a struct "
            "field's element and overwrites it (`s.q[i] = f(s.q[i])`), or a recorded overwrite of a struct-held "
            "array an earlier recorded op read."
        ),
        why=(
            "The same adjoint-replay corruption as WF106; in addition Warp's overwrite tracker "
            "(`wp.config.verify_autograd_array_access`) cannot see arrays inside structs, so a clean tracker run "
            "proves nothing here."
        ),
        example="""
@wp.struct
class Particles:
    q: wp.array(dtype=float)

@wp.kernel
def ground(p: Particles):
    i = wp.tid()
    if p.q[i] < 0.0:
        p.q[i] = 0.0
""",
        use_instead="""
@wp.kernel
def ground(p: Particles, q_out: wp.array(dtype=float)):
    i = wp.tid()
    q_out[i] = wp.max(p.q[i], 0.0)

q_out = wp.empty_like(particles.q)
wp.launch(ground, dim=n, inputs=[particles], outputs=[q_out])
particles = make_particles(q_out, particles.v)   # a new struct instance
""",
        fix=(
            "Safe: as WF106, then a *new* struct instance holding the fresh array. Do not assign the field of the "
            "instance that was launched (`particles.q = q_out`): the tape keeps a reference to that instance, so "
            "the earlier launch's adjoint would then run against the new field."
        ),
    )
    _CODE = """
import warp as wp


@wp.struct
class Particles:
    q: wp.array(dtype=float)
    v: wp.array(dtype=float)


@wp.kernel
def ground(p: Particles):
    i = wp.tid()
    if p.q[i] < 0.0:
        p.q[i] = 0.0  # expect: WF107


particles = Particles()
particles.q = wp.full(16, -1.0, dtype=float, requires_grad=True)
particles.v = wp.zeros(16, dtype=float, requires_grad=True)
"""
    VALID = [
        Example(
            _CODE.replace("  # expect: WF107", "")
            + """
wp.launch(ground, dim=16, inputs=[particles])
""",
            note="not on a tape",
        )
    ]
    INVALID = [
        Example(
            _CODE
            + """
with wp.Tape() as tape:
    wp.launch(ground, dim=16, inputs=[particles])
"""
        )
    ]

    def check_project(self, project: Project) -> Iterator[Finding]:
        yield from super().check_project(project)
        for hz in self.owned_hazards():
            ev = hz.write.event
            if (
                ev.kernel is not None
                and hz.write.param is not None
                and rmw_store_spans(ev.kernel, hz.write.param)
            ):
                continue  # reported at the kernel's store by the detector above
            yield self.finding(
                ev.span,
                f"kernel `{ev.kernel.name if ev.kernel else ''}` overwrites struct-held `{hz.write.param}` after "
                f"{hz.read.describe()} read it on the same tape (the overwrite tracker cannot see struct fields)",
                data=hazard_data(hz, kernel=ev.kernel.name if ev.kernel else "", param=hz.write.param or ""),
                related=read_related(hz),
            )
