"""WF704 nondeterministic-choice: argmin/argmax/nearest-neighbour/tie-breaking choices on the tape:
gradients may differ between runs or implementations at ties; not corruption."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.kernel_flow import call_short_name, names_in
from warpfix.model.reach import function_body_nodes, iter_taped
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


_CHOICE_CALLS = frozenset(
    {
        "argmin", "argmax", "mesh_query_point", "mesh_query_point_no_sign", "mesh_query_point_sign_normal",
        "mesh_query_point_sign_winding_number", "mesh_query_furthest_point_no_sign", "mesh_query_ray",
    }
)  # fmt: skip


def _manual_argmin(node: ast.If, loop_vars: set[str]) -> str | None:
    """``if d < best: best = d`` (optionally ``idx = j``) inside a loop: the running best's name."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    if not isinstance(test.ops[0], (ast.Lt, ast.Gt, ast.LtE, ast.GtE)):
        return None
    sides = (test.left, test.comparators[0])
    assigns = [s for s in node.body if isinstance(s, ast.Assign) and len(s.targets) == 1]
    for side, other in (sides, sides[::-1]):
        if not isinstance(side, ast.Name) or not names_in(other):
            continue  # a clamp against a constant (`if v < 0.0: v = 0.0`) chooses nothing
        for s in assigns:
            target = s.targets[0]
            if isinstance(target, ast.Name) and target.id == side.id and ast.dump(s.value) == ast.dump(other):
                return side.id
        if any(isinstance(s.targets[0], ast.Name) and s.targets[0].id == side.id for s in assigns) and any(
            names_in(s.value) & loop_vars for s in assigns
        ):
            return side.id
    return None


class NondeterministicChoice(Rule):
    id = "WF704"
    name = "nondeterministic-choice"
    severity = Severity.INFO
    fix_safety = FixSafety.NONE
    fix_description = "none: at ties any subgradient is valid; compare against references away from ties"
    doc = RuleDoc(
        what=(
            "Notes discrete choices on the tape: `wp.argmin`/`wp.argmax`, closest-point mesh "
            "queries, and hand-written running minima (`if d < best: best = d; idx = j`)."
        ),
        why=(
            "Autodiff differentiates the branch the forward actually took. Where the choice is "
            "ambiguous (exact ties, traversal order, atomic scheduling) different runs or "
            "implementations may pick differently and produce different, equally valid gradients. "
            "A sparse gradient mismatch at a selection boundary is ambiguity, not corruption."
        ),
        example="""
for j in range(n):
    d = wp.length(p[i] - q[j])
    if d < best:
        best = d
        nearest = j
""",
        use_instead="""
# Nothing to change in the code; when comparing gradients, nudge inputs away from ties and
# accept any subgradient at a tie.
""",
        fix="None: this is information for whoever reads a gradient comparison.",
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.kernel
def nearest(p: wp.array(dtype=wp.vec3), q: wp.array(dtype=wp.vec3), idx: wp.array(dtype=int)):
    i = wp.tid()
    best = float(1.0e10)
    k = int(-1)
    for j in range(q.shape[0]):
        d = wp.length(p[i] - q[j])
        if d < best:
            best = d
            k = j
    idx[i] = k

p = wp.zeros(4, dtype=wp.vec3)
q = wp.zeros(8, dtype=wp.vec3)
idx = wp.zeros(4, dtype=int)
wp.launch(nearest, dim=4, inputs=[p, q], outputs=[idx])
""",
            note="the choice runs outside any tape",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.kernel
def chamfer(p: wp.array(dtype=wp.vec3), q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    best = float(1.0e10)
    k = int(0)
    for j in range(8):
        d = wp.length_sq(p[i] - q[j])
        if d < best:  # expect: WF704
            best = d
            k = j
    wp.atomic_add(loss, 0, wp.length_sq(p[i] - q[k]))

p = wp.zeros(4, dtype=wp.vec3, requires_grad=True)
q = wp.zeros(8, dtype=wp.vec3, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(chamfer, dim=4, inputs=[p, q], outputs=[loss])
""",
        ),
    ]

    def check_project(self, project: Project) -> Iterator[Finding]:
        for kd, src, fn, severity in iter_taped(project, self.severity):
            loop_vars: set[str] = set()
            for node in function_body_nodes(fn):
                if isinstance(node, ast.For):
                    loop_vars |= names_in(node.target)
            for node in function_body_nodes(fn):
                label = None
                if isinstance(node, ast.Call) and call_short_name(src, node.func) in _CHOICE_CALLS:
                    label = f"`wp.{call_short_name(src, node.func)}`"
                elif isinstance(node, ast.If) and loop_vars and (best := _manual_argmin(node, loop_vars)):
                    label = f"the running choice on `{best}`"
                if label is None:
                    continue
                yield self.finding(
                    src.span(node.test if isinstance(node, ast.If) else node),
                    f"{label} in {kd.kind} `{kd.name}` is a discrete choice on the tape: at ties the "
                    f"gradient depends on which candidate wins (valid, but may differ between runs or "
                    f"implementations)",
                    severity=severity,
                    data={"kernel": kd.name},
                )
