"""WF703 piecewise-constant: `round/floor/ceil/trunc/sign`, int casts, comparisons feeding the loss:
zero gradient is *correct*; FD across the steps measures secants, not derivatives."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.kernel_flow import Flow, is_array_annotation, is_integer_annotation
from warpfix.model.reach import function_body_nodes, iter_taped
from warpfix.model.source import SourceFile
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


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

    def check_project(self, project: Project) -> Iterator[Finding]:
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
