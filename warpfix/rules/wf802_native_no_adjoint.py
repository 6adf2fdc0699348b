"""WF802 native-no-adjoint: `@wp.func_native` without `adj_snippet` used on a tape."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model.kernel_flow import is_array_annotation, is_integer_annotation
from warpfix.model.reach import function_body_nodes, iter_taped, kernel_defs
from warpfix.model.source import SourceFile
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


def _native_decorator(src: SourceFile, fn: ast.FunctionDef) -> ast.Call | None:
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and src.is_warp(dec.func, "func_native"):
            return dec
    return None


def _has_adjoint(dec: ast.Call) -> bool:
    given = dec.args[1] if len(dec.args) > 1 else None
    for kw in dec.keywords:
        if kw.arg == "adj_snippet":
            given = kw.value
    if given is None:
        return False
    return not (isinstance(given, ast.Constant) and (given.value is None or not str(given.value).strip()))


def _differentiable_signature(src: SourceFile, fn: ast.FunctionDef) -> bool:
    """A float-valued parameter, array or return: something a gradient could flow through."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    if fn.returns is not None and not is_integer_annotation(src, fn.returns):
        return True
    return any(
        a.annotation is not None
        and is_array_annotation(src, a.annotation)
        and not is_integer_annotation(src, a.annotation)
        for a in args
    )


class NativeNoAdjoint(Rule):
    id = "WF802"
    name = "native-no-adjoint"
    severity = Severity.ERROR
    fix_safety = FixSafety.NONE
    fix_description = "provide adj_snippet (the adjoint in C++/CUDA) or express the function in Warp"
    doc = RuleDoc(
        what=(
            "Flags a `@wp.func_native` without an `adj_snippet` that a kernel launched on a tape "
            "calls, when the snippet has float inputs or outputs."
        ),
        why=(
            "A native snippet is opaque to Warp's code generation: without `adj_snippet` its adjoint "
            "is empty, so every gradient that flows through it is silently zero."
        ),
        example="""
@wp.func_native("out[tid] = a * x[tid];")
def scale(a: float, x: wp.array(dtype=float), out: wp.array(dtype=float), tid: int): ...
""",
        use_instead="""
@wp.func_native("out[tid] = a * x[tid];", adj_snippet="adj_x[tid] += a * adj_out[tid];")
def scale(a: float, x: wp.array(dtype=float), out: wp.array(dtype=float), tid: int): ...
""",
        fix="None: the adjoint has to be written by hand.",
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.func_native("out[tid] = a * x[tid];", adj_snippet="adj_x[tid] += a * adj_out[tid];")
def scale(a: float, x: wp.array(dtype=float), out: wp.array(dtype=float), tid: int): ...

@wp.func_native("out[tid] = x[tid] + 1;")
def bump(x: wp.array(dtype=int), out: wp.array(dtype=int), tid: int): ...

@wp.kernel
def k(x: wp.array(dtype=float), y: wp.array(dtype=float), c: wp.array(dtype=int), d: wp.array(dtype=int)):
    tid = wp.tid()
    scale(2.0, x, y, tid)
    bump(c, d, tid)

x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
c = wp.zeros(4, dtype=int)
d = wp.zeros(4, dtype=int)
with wp.Tape() as tape:
    wp.launch(k, dim=4, inputs=[x, y, c, d])
""",
            note="an adjoint snippet; an integer-only snippet",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.func_native("out[tid] = a * x[tid];")
def scale(a: float, x: wp.array(dtype=float), out: wp.array(dtype=float), tid: int):  # expect: WF802
    ...

@wp.kernel
def k(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    tid = wp.tid()
    scale(2.0, x, y, tid)

x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(k, dim=4, inputs=[x, y])
""",
        ),
    ]

    def check_project(self, project: Project) -> Iterator[Finding]:
        callers: dict[str, list[tuple[Span, str]]] | None = None  # read only for a finding: every body
        for kd, src, fn, severity in iter_taped(project, self.severity, kinds=("func_native",)):
            dec = _native_decorator(src, fn)
            if dec is None or _has_adjoint(dec) or not _differentiable_signature(src, fn):
                continue
            if callers is None:
                callers = _call_sites(project)
            sites = tuple((span, f"called from `{caller}`") for span, caller in callers.get(kd.name, [])[:3])
            yield self.finding(
                _def_span(src, fn),
                f"native function `{kd.name}` has no `adj_snippet` but runs on a tape: gradients through "
                f"it are silently zero",
                severity=severity,
                data={"func": kd.name},
                related=sites,
            )


def _def_span(src: SourceFile, fn: ast.FunctionDef) -> Span:
    """The ``def`` line (not the decorator above it)."""
    full = src.span(fn)
    line = fn.lineno
    text = src.lines[line - 1] if line - 1 < len(src.lines) else ""
    col = text.find("def ") + 1 or full.column
    return Span(full.path, line, col, line, len(text) + 1)


def _call_sites(project: Project) -> dict[str, list[tuple[Span, str]]]:
    out: dict[str, list[tuple[Span, str]]] = {}
    for kd, src, fn in kernel_defs(project, "kernel", "func"):
        for node in function_body_nodes(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                out.setdefault(name, []).append((src.span(node), kd.name))
    return out
