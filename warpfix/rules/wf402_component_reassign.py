"""WF402 component-reassign: a component of a local `vec`/`mat`/`quat` assigned with `=` more than once
(`v[1] = …` twice); only `+=`/`-=` after the first write keep gradients."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.component_writes import (
    ComponentWrites,
    assign_target,
    component_key,
    composite_locals,
    kernel_overwrites,
    project_overwrites,
)
from warpfix.model.kernel_flow import Flow
from warpfix.model.reach import iter_taped
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


class ComponentReassign(Rule):
    id = "WF402"
    name = "component-reassign"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "build the value with its constructor, or turn the later write into an accumulation"
    doc = RuleDoc(
        what=(
            "Flags a plain `=` to a component of a local `vec`/`mat`/`quat`/`transform` that already "
            "holds a differentiable value: a second `v[1] = ...`, a write inside a loop over a value "
            "defined outside it, or a write over a component that came from an array load, vector "
            "arithmetic or a non-constant constructor argument."
        ),
        why=(
            "A component assignment does not clear the adjoint of the value it replaces, so that "
            "adjoint leaks into whatever the old value was computed from, without any warning. "
            "Constructor defaults and constant arguments carry no gradient, so the first write over "
            "them is fine; every later update must be `+=`/`-=`."
        ),
        example="""
v = wp.vec3(0.0)
v[0] = x[i]
v[1] = 2.0 * x[i]
v[0] = x[i] * x[i]
""",
        use_instead="""
v = wp.vec3(0.0)
v[0] = x[i]
v[1] = 2.0 * x[i]
v = wp.vec3(x[i] * x[i], v[1], v[2])
""",
        fix=(
            "Safe, forward values kept bit for bit: `m[i, j] = m[i, j] + e` becomes `m[i, j] += e` "
            "(in loops too); any other later write rebuilds the value with its constructor "
            "(`v = wp.vec3(v[0], e, v[2])`) when the type is spelled out and the write is not in a loop. "
            "Never `v[k] += e - v[k]` (not `e` in floating point). "
            "`wp.config.enable_vector_component_overwrites = True` also works but costs compile time (unsafe)."
        ),
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.kernel
def pack(x: wp.array(dtype=float), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v = wp.vec3()
    v[0] = x[i]
    v[1] = 2.0 * x[i]
    v[0] += x[i] * x[i]
    if x[i] > 0.0:
        v[2] = 1.0
    else:
        v[2] = -1.0
    out[i] = v

x = wp.ones(4, dtype=float, requires_grad=True)
out = wp.zeros(4, dtype=wp.vec3, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(pack, dim=4, inputs=[x], outputs=[out])
""",
            note="one write per component, branches, accumulation",
        ),
        Example(
            """
import warp as wp

wp.config.enable_vector_component_overwrites = True

@wp.kernel
def pack(x: wp.array(dtype=float), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v = wp.vec3()
    v[0] = x[i]
    v[0] = x[i] * x[i]
    out[i] = v

x = wp.ones(4, dtype=float, requires_grad=True)
out = wp.zeros(4, dtype=wp.vec3, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(pack, dim=4, inputs=[x], outputs=[out])
""",
            note="copy-on-write lowering switched on",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.kernel
def pack(x: wp.array(dtype=float), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v = wp.vec3(0.0)
    v[0] = x[i]
    v[1] = 2.0 * x[i]
    v[0] = x[i] * x[i]  # expect: WF402
    out[i] = v

x = wp.ones(4, dtype=float, requires_grad=True)
out = wp.zeros(4, dtype=wp.vec3, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(pack, dim=4, inputs=[x], outputs=[out])
""",
            expected_fix="""
import warp as wp

@wp.kernel
def pack(x: wp.array(dtype=float), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v = wp.vec3(0.0)
    v[0] = x[i]
    v[1] = 2.0 * x[i]
    v = wp.vec3(x[i] * x[i], v[1], v[2])
    out[i] = v

x = wp.ones(4, dtype=float, requires_grad=True)
out = wp.zeros(4, dtype=wp.vec3, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(pack, dim=4, inputs=[x], outputs=[out])
""",
        ),
        Example(
            """
import warp as wp

@wp.kernel
def trail(x: wp.array(dtype=float), n: int, out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    p = wp.vec2(0.0, 0.0)
    for j in range(n):
        p.x = x[j] * 0.5  # expect: WF402
        p[1] += x[j]
    out[i] = p

x = wp.ones(4, dtype=float, requires_grad=True)
out = wp.zeros(1, dtype=wp.vec2, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(trail, dim=1, inputs=[x, 4], outputs=[out])
""",
            note="written again on every iteration",
        ),
        Example(
            """
import warp as wp

@wp.kernel
def flatten(p: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    d = p[i + 1] - p[i]
    d[2] = 0.0  # expect: WF402
    if d[0] < 0.0:
        d[2] = 1.0  # expect: WF402
    out[i] = d

p = wp.ones(5, dtype=wp.vec3, requires_grad=True)
out = wp.zeros(4, dtype=wp.vec3, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(flatten, dim=4, inputs=[p], outputs=[out])
""",
            note="a component computed by arithmetic overwritten, then a conditional second write",
        ),
        Example(
            """
import warp as wp

@wp.func
def on_plane(v: wp.vec3):
    v[2] = 1.0  # expect: WF402
    return v

@wp.kernel
def lift(p: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    w = on_plane(p[i])
    wp.atomic_add(out, 0, w[0] + w[1] + w[2])

p = wp.ones(4, dtype=wp.vec3, requires_grad=True)
out = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(lift, dim=4, inputs=[p], outputs=[out])
""",
            note="overwriting a component of a parameter: p.grad[:, 2] comes out 1 instead of 0",
        ),
    ]

    def check_project(self, project: Project) -> Iterator[Finding]:
        if project_overwrites(project):
            return
        for kd, src, fn, severity in iter_taped(project, self.severity):
            if kernel_overwrites(kd):
                continue
            composites = composite_locals(src, kd, fn)
            if not composites:
                continue
            walker = ComponentWrites(src, Flow(src, kd, fn), composites)
            walker.run(fn)
            for stmt, var, comp, first in sorted(walker.hits.values(), key=lambda h: h[0].lineno):
                where = f"{kd.kind} `{kd.name}`"
                if first is stmt:
                    what = f"component {comp} of local `{var}` in {where} is assigned on every loop iteration"
                elif component_key(src, assign_target(first)) is not None:
                    what = f"component {comp} of local `{var}` in {where} is assigned again (first at line {first.lineno})"
                else:
                    origin = (
                        "a parameter"
                        if isinstance(first, ast.FunctionDef)
                        else f"bound at line {first.lineno}"
                    )
                    what = (
                        f"component {comp} of `{var}` in {where} already holds a differentiable value "
                        f"({origin}) and is overwritten"
                    )
                yield self.finding(
                    src.span(stmt),
                    f"{what}; a plain `=` to a vector/matrix component does not clear the adjoint of the "
                    f"value it replaces, which leaks into the gradient",
                    severity=severity,
                    data={
                        "target": ast.unparse(
                            stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
                        )
                    },
                    related=((src.span(first), "first assignment of this component"),),
                )
