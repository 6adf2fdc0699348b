"""WF801 adjoint-assign: `wp.adjoint[x] = …` inside `@wp.func_grad` (must accumulate)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.reach import function_body_nodes, tape_reach
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


class AdjointAssign(Rule):
    id = "WF801"
    name = "adjoint-assign"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "accumulate: `wp.adjoint[x] += ...`"
    doc = RuleDoc(
        what="Flags `wp.adjoint[x] = ...` inside a `@wp.func_grad`.",
        why=(
            "`wp.adjoint[x]` is the caller's adjoint of the argument, which may already hold "
            "contributions from other uses of the same value (`sq(x) + 3.0 * x`). Assigning "
            "discards them: the gradient is silently wrong whenever the argument is used anywhere "
            "else. Custom adjoints must accumulate."
        ),
        example="""
@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    wp.adjoint[x] = 2.0 * x * adj_ret
""",
        use_instead="""
@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    wp.adjoint[x] += 2.0 * x * adj_ret
""",
        fix="Safe: `+=` equals `=` when nothing else contributed, and is right when something did.",
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.func
def sq(x: float):
    return x * x

@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    g = 2.0 * x * adj_ret
    wp.adjoint[x] += g
"""
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.func
def sq(x: float):
    return x * x

@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    wp.adjoint[x] = 2.0 * x * adj_ret  # expect: WF801

@wp.kernel
def energy(x: wp.array(dtype=float), e: wp.array(dtype=float)):
    i = wp.tid()
    e[i] = sq(x[i]) + 3.0 * x[i]

x = wp.ones(4, dtype=float, requires_grad=True)
e = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(energy, dim=4, inputs=[x], outputs=[e])
""",
            expected_fix="""
import warp as wp

@wp.func
def sq(x: float):
    return x * x

@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    wp.adjoint[x] += 2.0 * x * adj_ret

@wp.kernel
def energy(x: wp.array(dtype=float), e: wp.array(dtype=float)):
    i = wp.tid()
    e[i] = sq(x[i]) + 3.0 * x[i]

x = wp.ones(4, dtype=float, requires_grad=True)
e = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(energy, dim=4, inputs=[x], outputs=[e])
""",
        ),
    ]

    def check_project(self, project: Project) -> Iterator[Finding]:
        reach = tape_reach(project)
        for kd in project.kernels:
            src = project.files.get(kd.path)
            if kd.kind != "func_grad" or src is None or not kd.is_function:
                continue
            # A custom adjoint exists only to be differentiated: report it unless the project
            # records launches on tapes and none of them reaches it.
            if reach.recorded_launches and id(kd) not in reach.taped:
                continue
            for node in function_body_nodes(kd.node):  # type: ignore[arg-type]
                if not isinstance(node, ast.Assign):
                    continue
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and (src.warp_name(t.value) or "").endswith("adjoint"):
                        var = ast.unparse(t.slice)
                        yield self.finding(
                            src.span(node),
                            f"`wp.adjoint[{var}] = ...` in func_grad `{kd.name}` overwrites the adjoint "
                            f"of `{var}` that other uses of it already accumulated; use `+=`",
                        )
