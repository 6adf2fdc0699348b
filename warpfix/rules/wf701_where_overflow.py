"""WF701 where-overflow: `wp.where`/`wp.select` whose unselected operand can overflow or hit a
singularity (`exp`, `log(1+exp(z))`, `pow`, division): both operands and both adjoints are
evaluated, so `inf*0 = NaN` reaches the gradient."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.kernel_flow import call_short_name, names_in
from warpfix.model.reach import function_body_nodes, iter_taped
from warpfix.model.source import SourceFile
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


#: Calls whose value or adjoint blows up somewhere in their domain (overflow or singularity).
_HAZARD_CALLS = {
    **dict.fromkeys(("exp", "pow", "cosh", "sinh"), "can overflow"),
    **dict.fromkeys(("log", "log2", "log10", "sqrt", "acos", "asin", "tan"), "has a singular derivative"),
}
#: Calls that clamp their argument away from a hazard (the "double where" trick and friends).
_CLAMPS = frozenset({"max", "min", "clamp", "where", "select"})


def _clamped(src: SourceFile, arg: ast.expr) -> bool:
    """``wp.max(d, eps)``, ``d + 1e-6``: an argument kept away from the hazard."""
    if isinstance(arg, ast.Call) and call_short_name(src, arg.func) in _CLAMPS:
        return True
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        return any(isinstance(side, ast.Constant) for side in (arg.left, arg.right))
    return False


def _is_one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1


def _softplus_arg(src: SourceFile, node: ast.expr) -> ast.expr | None:
    """``z`` for ``log(1.0 + exp(z))`` (either order)."""
    if not (isinstance(node, ast.Call) and call_short_name(src, node.func) == "log" and len(node.args) == 1):
        return None
    inner = node.args[0]
    if not (isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add)):
        return None
    for one, other in ((inner.left, inner.right), (inner.right, inner.left)):
        if (
            _is_one(one)
            and isinstance(other, ast.Call)
            and call_short_name(src, other.func) == "exp"
            and len(other.args) == 1
        ):
            return other.args[0]
    return None


def _hazards(src: SourceFile, operand: ast.expr, guard: set[str]) -> Iterator[tuple[ast.expr, str]]:
    """Sub-expressions of ``operand`` that can overflow or hit a singularity at values of the
    guarded names, with a short description."""
    for node in ast.walk(operand):
        if isinstance(node, ast.Call):
            name = call_short_name(src, node.func)
            if name in _HAZARD_CALLS and node.args:
                args = node.args if name != "pow" else node.args[:1]
                if any(names_in(a) & guard and not _clamped(src, a) for a in args):
                    yield node, f"`wp.{name}` {_HAZARD_CALLS[name]}"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Pow)):
            risky = node.right if isinstance(node.op, ast.Div) else node.left
            if isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant):
                v = node.right.value
                if isinstance(v, (int, float)) and v >= 1 and float(v).is_integer():
                    continue  # x**2: smooth everywhere
            if names_in(risky) & guard and not _clamped(src, risky) and not isinstance(risky, ast.Constant):
                yield (
                    node,
                    "a division can divide by zero"
                    if isinstance(node.op, ast.Div)
                    else "a power can overflow",
                )


class WhereOverflow(Rule):
    id = "WF701"
    name = "where-overflow"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "use the stable form (softplus) or a real if/else that evaluates only the taken branch"
    doc = RuleDoc(
        what=(
            "Flags `wp.where`/`wp.select` used as a guard: the condition tests a quantity and an "
            "operand applies `exp`, `log`, `pow`, `sqrt` or a division to that same quantity."
        ),
        why=(
            "A select is not a branch: both operands are evaluated and both adjoints run. The "
            "guarded operand still overflows (or divides by zero) where it is not selected, and its "
            "adjoint contributes `inf * 0 = NaN` to the gradient while every forward value is "
            "finite. The softplus guard `wp.where(z > 20.0, z, wp.log(1.0 + wp.exp(z)))` gives NaN "
            "gradients for z > 88."
        ),
        example="""
s = wp.where(z > 20.0, z, wp.log(1.0 + wp.exp(z)))
r = wp.where(d > 1.0e-6, x / d, 0.0)
""",
        use_instead="""
s = wp.max(z, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(z)))
if d > 1.0e-6:
    r = x / d
else:
    r = 0.0
""",
        fix=(
            "Safe: the softplus guard becomes the stable formula (equal forward values); any other "
            "select that is a whole assignment or return becomes an `if`/`else`."
        ),
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.kernel
def activation(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    z = x[i]
    y[i] = wp.max(z, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(z)))
    d = wp.abs(z)
    r = wp.where(d > 1.0e-6, z / wp.max(d, 1.0e-6), 0.0)
    y[i] += wp.where(z > 0.0, z, 0.01 * z) + r

x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(activation, dim=4, inputs=[x], outputs=[y])
""",
            note="stable softplus, clamped divisor, leaky relu",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.kernel
def activation(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    z = x[i]
    y[i] = wp.where(z > 20.0, z, wp.log(1.0 + wp.exp(z)))  # expect: WF701

x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(activation, dim=4, inputs=[x], outputs=[y])
""",
            expected_fix="""
import warp as wp

@wp.kernel
def activation(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    z = x[i]
    y[i] = wp.max(z, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(z)))

x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(activation, dim=4, inputs=[x], outputs=[y])
""",
        ),
        Example(
            """
import warp as wp

@wp.func
def safe_ratio(x: float, d: float):
    return wp.select(d > 1.0e-6, 0.0, x / d)  # expect: WF701

@wp.kernel
def ratios(x: wp.array(dtype=float), d: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = safe_ratio(x[i], d[i])

x = wp.ones(4, dtype=float, requires_grad=True)
d = wp.zeros(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(ratios, dim=4, inputs=[x, d], outputs=[y])
""",
            expected_fix="""
import warp as wp

@wp.func
def safe_ratio(x: float, d: float):
    if d > 1.0e-6:
        return x / d
    else:
        return 0.0

@wp.kernel
def ratios(x: wp.array(dtype=float), d: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = safe_ratio(x[i], d[i])

x = wp.ones(4, dtype=float, requires_grad=True)
d = wp.zeros(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(ratios, dim=4, inputs=[x, d], outputs=[y])
""",
            note="wp.select takes (cond, value_if_false, value_if_true)",
        ),
    ]

    def check_project(self, project: Project) -> Iterator[Finding]:
        for kd, src, fn, severity in iter_taped(project, self.severity):
            for node in function_body_nodes(fn):
                if not isinstance(node, ast.Call) or len(node.args) != 3 or node.keywords:
                    continue
                kind = call_short_name(src, node.func)
                if kind not in ("where", "select"):
                    continue
                cond = node.args[0]
                guard = names_in(cond)
                for operand in node.args[1:]:
                    hit = next(_hazards(src, operand, guard), None)
                    if hit is None:
                        continue
                    hazard, what = hit
                    softplus = any(
                        (z := _softplus_arg(src, a)) is not None and ast.dump(z) == ast.dump(b)
                        for a, b in ((node.args[1], node.args[2]), (node.args[2], node.args[1]))
                    )
                    fix = (
                        "replace the guard with the stable softplus "
                        "`wp.max(z, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(z)))`"
                        if softplus
                        else "use a real if/else, which only differentiates the taken branch"
                    )
                    yield self.finding(
                        src.span(node),
                        f"`wp.{kind}` in {kd.kind} `{kd.name}` guards `{ast.unparse(cond)}` but both operands "
                        f"and both adjoints are evaluated: `{ast.unparse(hazard)}`: {what} "
                        f"where it is not selected, and its adjoint turns into NaN",
                        severity=severity,
                        fix_description=fix,
                        related=((src.span(hazard), "evaluated even when not selected"),),
                    )
                    break
