"""WF7xx — non-smooth and numerical hazards in kernel code (checklist §9, §9b, §9c).

All four rules look inside kernel/func bodies and follow the reach policy of
:mod:`warpfix.rules.wf4_kernel_lang` (taped code only; projects without any tape get the
error rules at warning severity and the warning/info rules not at all).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.source import SourceFile
from warpfix.rules.base import Example, Rule, RuleDoc
from warpfix.rules.wf4_kernel_lang import (
    Flow,
    function_body_nodes,
    is_array_annotation,
    is_integer_annotation,
    iter_taped,
)

if TYPE_CHECKING:
    from warpfix.model import Project

#: Calls whose value or adjoint blows up somewhere in their domain (overflow or singularity).
_HAZARD_CALLS = {
    **dict.fromkeys(("exp", "pow", "cosh", "sinh"), "can overflow"),
    **dict.fromkeys(("log", "log2", "log10", "sqrt", "acos", "asin", "tan"), "has a singular derivative"),
}
#: Calls that clamp their argument away from a hazard (the "double where" trick and friends).
_CLAMPS = frozenset({"max", "min", "clamp", "where", "select"})


def _short(src: SourceFile, func: ast.expr) -> str | None:
    wn = src.warp_name(func)
    return wn.rpartition(".")[2] if wn is not None else None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _clamped(src: SourceFile, arg: ast.expr) -> bool:
    """``wp.max(d, eps)``, ``d + 1e-6``: an argument kept away from the hazard."""
    if isinstance(arg, ast.Call) and _short(src, arg.func) in _CLAMPS:
        return True
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        return any(isinstance(side, ast.Constant) for side in (arg.left, arg.right))
    return False


def _is_one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1


def _softplus_arg(src: SourceFile, node: ast.expr) -> ast.expr | None:
    """``z`` for ``log(1.0 + exp(z))`` (either order)."""
    if not (isinstance(node, ast.Call) and _short(src, node.func) == "log" and len(node.args) == 1):
        return None
    inner = node.args[0]
    if not (isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add)):
        return None
    for one, other in ((inner.left, inner.right), (inner.right, inner.left)):
        if (
            _is_one(one)
            and isinstance(other, ast.Call)
            and _short(src, other.func) == "exp"
            and len(other.args) == 1
        ):
            return other.args[0]
    return None


def _hazards(src: SourceFile, operand: ast.expr, guard: set[str]) -> Iterator[tuple[ast.expr, str]]:
    """Sub-expressions of ``operand`` that can overflow or hit a singularity at values of the
    guarded names, with a short description."""
    for node in ast.walk(operand):
        if isinstance(node, ast.Call):
            name = _short(src, node.func)
            if name in _HAZARD_CALLS and node.args:
                args = node.args if name != "pow" else node.args[:1]
                if any(_names(a) & guard and not _clamped(src, a) for a in args):
                    yield node, f"`wp.{name}` {_HAZARD_CALLS[name]}"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Pow)):
            risky = node.right if isinstance(node.op, ast.Div) else node.left
            if isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant):
                v = node.right.value
                if isinstance(v, (int, float)) and v >= 1 and float(v).is_integer():
                    continue  # x**2: smooth everywhere
            if _names(risky) & guard and not _clamped(src, risky) and not isinstance(risky, ast.Constant):
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

    def check(self, project: Project) -> Iterator[Finding]:
        for kd, src, fn, severity in iter_taped(project, self.severity):
            for node in function_body_nodes(fn):
                if not isinstance(node, ast.Call) or len(node.args) != 3 or node.keywords:
                    continue
                kind = _short(src, node.func)
                if kind not in ("where", "select"):
                    continue
                cond = node.args[0]
                guard = _names(cond)
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


# ---------------------------------------------------------------------------------------------
# WF702
# ---------------------------------------------------------------------------------------------
def _length_operand(src: SourceFile, node: ast.Call) -> ast.expr | None:
    """``v`` for ``wp.sqrt(wp.dot(v, v))`` / ``wp.sqrt(wp.length_sq(v))``."""
    if _short(src, node.func) != "sqrt" or len(node.args) != 1 or not isinstance(node.args[0], ast.Call):
        return None
    inner = node.args[0]
    name = _short(src, inner.func)
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
        name = _short(src, e.func)
        if name == "length_sq":
            return True
        if name == "dot" and len(e.args) == 2:
            return ast.dump(e.args[0]) == ast.dump(e.args[1])
    return False


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue, ast.Break))


def _guarded(parents: dict[int, ast.AST], node: ast.AST, names: set[str]) -> bool:
    """Whether an enclosing ``if``/``while``/conditional expression tests one of ``names``, or
    an earlier ``if`` on them leaves the block (``if l < eps: return ...``)."""
    child, cur = node, parents.get(id(node))
    while cur is not None:
        if isinstance(cur, (ast.If, ast.While, ast.IfExp)) and _names(cur.test) & names:
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
                    if isinstance(earlier, ast.If) and _names(earlier.test) & names and _exits(earlier.body):
                        return True
        child, cur = cur, parents.get(id(cur))
    return False


def _parents(fn: ast.FunctionDef) -> dict[int, ast.AST]:
    out: dict[int, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            out[id(child)] = node
    return out


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
            "Safe for the `sqrt(dot(v, v))` form (same forward value, guarded adjoint). The other "
            "forms need a guard or a custom gradient and have no automatic fix."
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

    def check(self, project: Project) -> Iterator[Finding]:
        for kd, src, fn, severity in iter_taped(project, self.severity):
            parents = _parents(fn)
            norms = _norm_locals(src, fn)
            for node in function_body_nodes(fn):
                if isinstance(node, ast.Call) and _short(src, node.func) == "sqrt" and len(node.args) == 1:
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
                        parents, node, _names(node.args[0])
                    ):
                        yield self.finding(
                            src.span(node),
                            f"`wp.sqrt` of a sum of squares in {kd.kind} `{kd.name}` has an infinite "
                            f"derivative at zero; add an epsilon under the root, guard it, or use `wp.length`",
                            severity=severity,
                            fix_safety=FixSafety.NONE,
                            fix_description="guard the zero case or add an epsilon under the root",
                        )
                elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                    div = node.right
                    is_norm = (
                        isinstance(div, ast.Call) and _short(src, div.func) in ("length", "norm_l2")
                    ) or (isinstance(div, ast.Name) and div.id in norms)
                    if is_norm and not _guarded(parents, node, _names(div)):
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
                _short(src, v.func) in ("length", "norm_l2")
                or (_short(src, v.func) == "sqrt" and v.args and _sum_of_squares(src, v.args[0]))
            )
            for v in values
        ):
            out.add(name)
    return out


# ---------------------------------------------------------------------------------------------
# WF703
# ---------------------------------------------------------------------------------------------
def _sinks(src: SourceFile, fn: ast.FunctionDef, flow: Flow) -> Iterator[tuple[ast.expr, str]]:
    """(value, array name) for every value written into a non-integer array parameter."""
    anns = {a.arg: a.annotation for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}

    def array_root(t: ast.expr) -> str | None:
        while isinstance(t, (ast.Subscript, ast.Attribute)):
            t = t.value
        if isinstance(t, ast.Name) and t.id in anns and not is_integer_annotation(src, anns[t.id]):
            return t.id
        return None

    for node in function_body_nodes(fn):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if (
                    isinstance(t, ast.Subscript)
                    and (root := array_root(t))
                    and is_array_annotation(src, anns[root])
                ):
                    yield node.value, root
        elif (
            isinstance(node, ast.Call) and node.args and flow.call_name(node) in ("atomic_add", "atomic_sub")
        ):
            root = array_root(node.args[0])
            if root is not None:
                yield node.args[-1], root


class PiecewiseConstant(Rule):
    id = "WF703"
    name = "piecewise-constant"
    severity = Severity.INFO
    fix_safety = FixSafety.UNSAFE
    fix_description = (
        "if a surrogate gradient is wanted, wrap the op in a @wp.func with a straight-through @wp.func_grad"
    )
    doc = RuleDoc(
        what=(
            "Notes a `round`/`floor`/`ceil`/`trunc`/`sign`, an integer cast or a comparison turned "
            "into a value, through which a taped kernel's output depends on its input *only*: the "
            "gradient through it is exactly zero."
        ),
        why=(
            "The zero gradient is mathematically correct, not a bug, but it looks exactly like a "
            "broken chain (constant loss, zero upstream gradient), and finite differences across the "
            "steps measure secants, so FD and autodiff disagree loudly. If optimisation should see "
            "through the step, that is a modelling decision: a straight-through estimator."
        ),
        example="""
q = wp.round(x[i] / step) * step
y[i] = q
""",
        use_instead="""
@wp.func
def quantize(x: float, step: float):
    return wp.round(x / step) * step

@wp.func_grad(quantize)
def adj_quantize(x: float, step: float, adj_ret: float):
    wp.adjoint[x] += adj_ret   # straight-through estimator
""",
        fix="Unsafe: a surrogate gradient changes what is optimised; the user decides.",
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.kernel
def deposit(p: wp.array(dtype=float), w: wp.array(dtype=float), grid: wp.array(dtype=float), frac: wp.array(dtype=float)):
    i = wp.tid()
    cell = int(p[i] / 0.1)
    f = p[i] / 0.1 - float(cell)
    frac[i] = f
    wp.atomic_add(grid, cell, w[i] * (1.0 - f))
    if p[i] > 0.5:
        frac[i] += p[i]

p = wp.ones(4, dtype=float, requires_grad=True)
w = wp.ones(4, dtype=float, requires_grad=True)
grid = wp.zeros(16, dtype=float, requires_grad=True)
frac = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(deposit, dim=4, inputs=[p, w], outputs=[grid, frac])
""",
            note="an int cast used as an index, a fractional part, a branch",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.kernel
def quantize(x: wp.array(dtype=float), step: float, y: wp.array(dtype=float)):
    i = wp.tid()
    q = wp.round(x[i] / step) * step  # expect: WF703
    y[i] = q

x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(quantize, dim=4, inputs=[x, 0.25], outputs=[y])
""",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for kd, src, fn, severity in iter_taped(project, self.severity, kinds=("kernel",)):
            flow = Flow(src, kd, fn)
            reported: set[int] = set()
            for value, array in _sinks(src, fn, flow):
                for source, dep in flow.deps(value).items():
                    if dep.smooth:
                        continue
                    for flat in sorted(dep.flats, key=lambda n: (n.lineno, n.col_offset)):
                        if id(flat) in reported:
                            continue
                        reported.add(id(flat))
                        what = _flat_label(src, flat)
                        yield self.finding(
                            src.span(flat),
                            f"{what} in {kd.kind} `{kd.name}` is piecewise constant: `{array}` depends on "
                            f"`{source}` only through it, so its gradient is exactly zero (correct, but "
                            f"finite differences will disagree); a straight-through estimator is a "
                            f"modelling choice",
                            severity=severity,
                            data={"kernel": kd.name, "source": source, "sink": array},
                        )


def _flat_label(src: SourceFile, node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        wn = src.warp_name(node.func)
        return f"`wp.{wn}`" if wn else f"`{ast.unparse(node.func)}(...)`"
    return f"`{ast.unparse(node)}`"


# ---------------------------------------------------------------------------------------------
# WF704
# ---------------------------------------------------------------------------------------------
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
        if not isinstance(side, ast.Name) or not _names(other):
            continue  # a clamp against a constant (`if v < 0.0: v = 0.0`) chooses nothing
        for s in assigns:
            target = s.targets[0]
            if isinstance(target, ast.Name) and target.id == side.id and ast.dump(s.value) == ast.dump(other):
                return side.id
        if any(isinstance(s.targets[0], ast.Name) and s.targets[0].id == side.id for s in assigns) and any(
            _names(s.value) & loop_vars for s in assigns
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

    def check(self, project: Project) -> Iterator[Finding]:
        for kd, src, fn, severity in iter_taped(project, self.severity):
            loop_vars: set[str] = set()
            for node in function_body_nodes(fn):
                if isinstance(node, ast.For):
                    loop_vars |= _names(node.target)
            for node in function_body_nodes(fn):
                label = None
                if isinstance(node, ast.Call) and _short(src, node.func) in _CHOICE_CALLS:
                    label = f"`wp.{_short(src, node.func)}`"
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
