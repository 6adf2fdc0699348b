"""WF702 singular-point: `wp.sqrt(wp.dot(v, v))` (use `wp.length`, whose adjoint is guarded),
`wp.sqrt(x)` / division / `wp.normalize` where the argument can be zero on the tape."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.kernel_flow import call_short_name, names_in
from warpfix.model.reach import function_body_nodes, iter_taped
from warpfix.model.source import SourceFile
from warpfix.model.tree_walks import parent_map
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


def _length_operand(src: SourceFile, node: ast.Call) -> ast.expr | None:
    """``v`` for ``wp.sqrt(wp.dot(v, v))`` / ``wp.sqrt(wp.length_sq(v))``."""
    if call_short_name(src, node.func) != "sqrt" or len(node.args) != 1 or not isinstance(node.args[0], ast.Call):
        return None
    inner = node.args[0]
    name = call_short_name(src, inner.func)
    if name == "length_sq" and len(inner.args) == 1:
        return inner.args[0]
    if name == "dot" and len(inner.args) == 2 and ast.dump(inner.args[0]) == ast.dump(inner.args[1]):
        return inner.args[0]
    return None


def _sum_of_squares(src: SourceFile, e: ast.expr) -> bool:
    """``x*x + y*y``, ``a**2 + b**2``, ``wp.dot(v, v)``: zero when every term is zero."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return _sum_of_squares(src, e.left) and _sum_of_squares(src, e.right)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        return ast.dump(e.left) == ast.dump(e.right) and not isinstance(e.left, ast.Constant)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Pow):
        return isinstance(e.right, ast.Constant) and e.right.value == 2
    if isinstance(e, ast.Call):
        name = call_short_name(src, e.func)
        if name == "length_sq":
            return True
        if name == "dot" and len(e.args) == 2:
            return ast.dump(e.args[0]) == ast.dump(e.args[1])
    return False


def _scalar_squares(e: ast.expr) -> list[str] | None:
    """The texts of ``a, b`` in ``a * a + b * b`` (2 to 4 squares of names, attributes or subscripts without
    calls), which ``wp.length(wp.vector(a, b))`` computes alike; None for any other sum."""
    terms: list[str] = []
    todo = [e]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            todo += [n.right, n.left]
        elif (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
              and isinstance(n.left, (ast.Name, ast.Attribute, ast.Subscript))
              and ast.dump(n.left) == ast.dump(n.right) and not any(isinstance(c, ast.Call) for c in ast.walk(n.left))):
            terms.append(ast.unparse(n.left))
        else:
            return None
    return terms if 2 <= len(terms) <= 4 else None


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue, ast.Break))


def _guarded(parents: dict[int, ast.AST], node: ast.AST, names: set[str]) -> bool:
    """Whether an enclosing ``if``/``while``/conditional expression tests one of ``names``, or
    an earlier ``if`` on them leaves the block (``if l < eps: return ...``)."""
    child, cur = node, parents.get(id(node))
    while cur is not None:
        if isinstance(cur, (ast.If, ast.While, ast.IfExp)) and names_in(cur.test) & names:
            return True
        if (
            isinstance(cur, ast.Call)
            and isinstance(cur.func, ast.Attribute)
            and cur.func.attr in ("where", "select")
        ):
            return True  # a select guard is WF701's business
        for field_name in ("body", "orelse"):
            block = getattr(cur, field_name, None)
            if isinstance(block, list) and child in block:
                for earlier in block[: block.index(child)]:
                    if isinstance(earlier, ast.If) and names_in(earlier.test) & names and _exits(earlier.body):
                        return True
        child, cur = cur, parents.get(id(cur))
    return False


class SingularPoint(Rule):
    id = "WF702"
    name = "singular-point"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    fix_description = "use wp.length(v), whose adjoint is guarded at the zero vector"
    doc = RuleDoc(
        what=(
            "Flags `wp.sqrt(wp.dot(v, v))` (use `wp.length`), and on a tape an unguarded `wp.sqrt` "
            "of a sum of squares or a division by a length/norm, which are singular at zero."
        ),
        why=(
            "The derivative of `sqrt` at 0 is infinite: `wp.sqrt(wp.dot(v, v))` gives a NaN gradient "
            "for the zero vector (coincident particles, a spring at rest length zero, a velocity that "
            "starts at rest), while `wp.length(v)` has a guarded adjoint that returns 0 there. A "
            "division by a norm that can be zero has the same problem in forward and backward."
        ),
        example="""
d = p[i] - p[j]
dist = wp.sqrt(wp.dot(d, d))
""",
        use_instead="""
d = p[i] - p[j]
dist = wp.length(d)
""",
        fix=(
            "Safe for the `sqrt(dot(v, v))` form and for a sum of 2 to 4 scalar squares, `sqrt(a * a + b * b)` -> "
            "`wp.length(wp.vector(a, b))` (same forward value, guarded adjoint). The other forms need a guard or a "
            "custom gradient and have no automatic fix."
        ),
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.kernel
def spring(p: wp.array(dtype=wp.vec3), e: wp.array(dtype=float)):
    i = wp.tid()
    d = p[i + 1] - p[i]
    l = wp.length(d)
    r = wp.sqrt(wp.dot(d, d) + 1.0e-12)
    n = wp.vec3(0.0)
    if l > 1.0e-6:
        n = d / l
    e[i] = l * l + r + wp.dot(n, d)

p = wp.zeros(5, dtype=wp.vec3, requires_grad=True)
e = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(spring, dim=4, inputs=[p], outputs=[e])
""",
            note="wp.length, an epsilon under the root, a guarded division",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.kernel
def spring(p: wp.array(dtype=wp.vec3), e: wp.array(dtype=float)):
    i = wp.tid()
    d = p[i + 1] - p[i]
    l = wp.sqrt(wp.dot(d, d))  # expect: WF702
    e[i] = (l - 1.0) * (l - 1.0)

p = wp.zeros(5, dtype=wp.vec3, requires_grad=True)
e = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(spring, dim=4, inputs=[p], outputs=[e])
""",
            expected_fix="""
import warp as wp

@wp.kernel
def spring(p: wp.array(dtype=wp.vec3), e: wp.array(dtype=float)):
    i = wp.tid()
    d = p[i + 1] - p[i]
    l = wp.length(d)
    e[i] = (l - 1.0) * (l - 1.0)

p = wp.zeros(5, dtype=wp.vec3, requires_grad=True)
e = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(spring, dim=4, inputs=[p], outputs=[e])
""",
        ),
        Example(
            """
import warp as wp

@wp.kernel
def direction(v: wp.array(dtype=wp.vec2), out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    s = wp.sqrt(v[i][0] * v[i][0] + v[i][1] * v[i][1])  # expect: WF702
    out[i] = v[i] / wp.length(v[i])  # expect: WF702

v = wp.zeros(4, dtype=wp.vec2, requires_grad=True)
out = wp.zeros(4, dtype=wp.vec2, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(direction, dim=4, inputs=[v], outputs=[out])
""",
            note="no mechanical fix: warnings only",
        ),
    ]

    def check_project(self, project: Project) -> Iterator[Finding]:
        for kd, src, fn, severity in iter_taped(project, self.severity):
            parents = parent_map(fn)
            norms = _norm_locals(src, fn)
            for node in function_body_nodes(fn):
                if isinstance(node, ast.Call) and call_short_name(src, node.func) == "sqrt" and len(node.args) == 1:
                    v = _length_operand(src, node)
                    if v is not None:
                        yield self.finding(
                            src.span(node),
                            f"`{ast.unparse(node)}` in {kd.kind} `{kd.name}` has an infinite derivative when "
                            f"`{ast.unparse(v)}` is zero (NaN gradient); `wp.length({ast.unparse(v)})` has "
                            f"a guarded adjoint",
                            severity=severity,
                        )
                    elif _sum_of_squares(src, node.args[0]) and not _guarded(
                        parents, node, names_in(node.args[0])
                    ):
                        terms = _scalar_squares(node.args[0])
                        yield self.finding(
                            src.span(node),
                            f"`wp.sqrt` of a sum of squares in {kd.kind} `{kd.name}` has an infinite "
                            f"derivative at zero; add an epsilon under the root, guard it, or use `wp.length`",
                            severity=severity,
                            fix_safety=FixSafety.NONE if terms is None else FixSafety.SAFE,
                            fix_description="guard the zero case or add an epsilon under the root" if terms is None
                            else f"`wp.length(wp.vector({', '.join(terms)}))`: the same value, with a guarded adjoint",
                        )
                elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                    div = node.right
                    is_norm = (
                        isinstance(div, ast.Call) and call_short_name(src, div.func) in ("length", "norm_l2")
                    ) or (isinstance(div, ast.Name) and div.id in norms)
                    if is_norm and not _guarded(parents, node, names_in(div)):
                        yield self.finding(
                            src.span(node),
                            f"division by the norm `{ast.unparse(div)}` in {kd.kind} `{kd.name}` is singular "
                            f"when it is zero (inf/NaN in forward and gradient); guard it or use `wp.normalize`",
                            severity=severity,
                            fix_safety=FixSafety.NONE,
                            fix_description="guard the zero case (if norm > eps) or use wp.normalize",
                        )


def _norm_locals(src: SourceFile, fn: ast.FunctionDef) -> set[str]:
    """Locals assigned only from ``wp.length(...)`` / ``wp.sqrt(...)`` of a sum of squares."""
    assigned: dict[str, list[ast.expr]] = {}
    for node in function_body_nodes(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            assigned.setdefault(node.target.id, []).append(node.value)
    out = set()
    for name, values in assigned.items():
        if all(
            isinstance(v, ast.Call)
            and (
                call_short_name(src, v.func) in ("length", "norm_l2")
                or (call_short_name(src, v.func) == "sqrt" and v.args and _sum_of_squares(src, v.args[0]))
            )
            for v in values
        ):
            out.add(name)
    return out
