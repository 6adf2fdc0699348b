"""WF401 inplace-mul: `a[i] *= b` or `a[i] /= b` on an array element inside a kernel (non-
differentiable; the only warning appears at codegen under debug logging). Rewriting to `a[i] = a[i]
* b` is still an overwrite."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.kernel_flow import is_integer_annotation
from warpfix.model.reach import function_body_nodes, iter_taped
from warpfix.model.source import SourceFile
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project


class InplaceMul(Rule):
    id = "WF401"
    name = "inplace-mul"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "write the product to a separate output array and rebind it at the launch sites"
    doc = RuleDoc(
        what="Flags `a[i] *= b` and `a[i] /= b` on an array element inside a kernel or func that runs on a tape.",
        why=(
            "Only `+=`/`-=` on array elements are differentiable. An in-place multiply or divide "
            "overwrites the value its own adjoint needs, so the gradient of `b` (and of everything "
            "upstream of `a`) is silently wrong. Warp warns only at codegen with debug logging. "
            "Rewriting it as `a[i] = a[i] * b` is still an overwrite of an array the kernel read."
        ),
        example="""
@wp.kernel
def damp(v: wp.array(dtype=wp.vec3), k: wp.array(dtype=float)):
    i = wp.tid()
    v[i] *= k[0]
""",
        use_instead="""
@wp.kernel
def damp(v: wp.array(dtype=wp.vec3), k: wp.array(dtype=float), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v_out[i] = v[i] * k[0]

# launch sites: v_out = wp.empty_like(v); wp.launch(damp, ..., inputs=[v, k], outputs=[v_out]); v = v_out
""",
        fix=(
            "Safe: the kernel gets a separate output parameter; every launch site allocates it with "
            "`wp.empty_like` and rebinds the name after the launch, so forward values are unchanged."
        ),
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.kernel
def accumulate(f: wp.array(dtype=float), g: wp.array(dtype=float)):
    i = wp.tid()
    f[i] += 2.0 * g[i]

@wp.kernel
def scale(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i] * b[i]

a = wp.ones(4, dtype=float, requires_grad=True)
b = wp.ones(4, dtype=float, requires_grad=True)
out = wp.zeros(4, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=4, inputs=[a, b], outputs=[out])
    wp.launch(accumulate, dim=4, inputs=[out, b])
""",
            note="accumulation and a separate output",
        ),
        Example(
            """
import warp as wp

@wp.kernel
def normalize_weights(w: wp.array(dtype=float), total: float):
    i = wp.tid()
    w[i] /= total

w = wp.ones(4, dtype=float)
wp.launch(normalize_weights, dim=4, inputs=[w, 4.0])

@wp.kernel
def loss_k(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])

x = wp.ones(4, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(loss_k, dim=4, inputs=[x, loss])
""",
            note="the in-place kernel runs only outside the tape",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.kernel
def damp(v: wp.array(dtype=wp.vec3), k: wp.array(dtype=float)):
    i = wp.tid()
    v[i] *= k[0]  # expect: WF401

v = wp.ones(8, dtype=wp.vec3, requires_grad=True)
k = wp.full(1, 0.9, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(damp, dim=8, inputs=[v, k])
""",
            expected_fix="""
import warp as wp

@wp.kernel
def damp(v: wp.array(dtype=wp.vec3), k: wp.array(dtype=float), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v_out[i] = v[i] * k[0]

v = wp.ones(8, dtype=wp.vec3, requires_grad=True)
k = wp.full(1, 0.9, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    v_out = wp.empty_like(v)
    wp.launch(damp, dim=8, inputs=[v, k], outputs=[v_out])
    v = v_out
""",
        ),
        Example(
            """
import warp as wp

@wp.func
def shrink(a: wp.array(dtype=float), i: int, s: float):
    a[i] /= s  # expect: WF401

@wp.kernel
def step(a: wp.array(dtype=float), s: float):
    shrink(a, wp.tid(), s)
""",
            note="no tape anywhere in the project: reported at warning severity",
        ),
    ]

    def check_project(self, project: Project) -> Iterator[Finding]:
        for kd, src, fn, severity in iter_taped(project, self.severity):
            args = {a.arg: a.annotation for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
            for param, facts in kd.params.items():
                if _integer_param(project, src, args, param):
                    continue
                for acc in facts.accesses:
                    if acc.kind != "inplace_mul" or acc.via is not None:
                        continue
                    stmt = _stmt_at(fn, acc.span.line, acc.span.column)
                    if stmt is None or not isinstance(stmt.op, (ast.Mult, ast.Div)):
                        continue
                    op = "*=" if isinstance(stmt.op, ast.Mult) else "/="
                    target = ast.unparse(stmt.target)
                    yield self.finding(
                        acc.span,
                        f"`{target} {op} ...` in {kd.kind} `{kd.name}` is an in-place "
                        f"{'multiply' if op == '*=' else 'divide'} of array `{param}`: it is not differentiable, so gradients through `{param}` and the "
                        f"factor are wrong",
                        severity=severity,
                        data={"kernel": kd.name, "param": param},
                        related=((kd.span, f"{kd.kind} `{kd.name}`"),),
                    )


def _integer_param(project: Project, src: SourceFile, args: dict[str, ast.expr | None], param: str) -> bool:
    """Whether a parameter (``x``) or struct field reached through one (``s.x``) holds integers."""
    root, _, field_name = param.partition(".")
    ann = args.get(root)
    if not field_name:
        return is_integer_annotation(src, ann)
    name = ann.id if isinstance(ann, ast.Name) else ann.attr if isinstance(ann, ast.Attribute) else ""
    struct = project.kernel_named(name, prefer_path=src.path)
    text = struct.struct_fields.get(field_name) if struct is not None and struct.kind == "struct" else None
    if text is None:
        return False
    struct_src = project.files.get(struct.path, src)
    return is_integer_annotation(struct_src, ast.parse(text, mode="eval").body)


def _stmt_at(fn: ast.FunctionDef, line: int, column: int) -> ast.AugAssign | None:
    for node in function_body_nodes(fn):
        if isinstance(node, ast.AugAssign) and node.lineno == line and node.col_offset + 1 == column:
            return node
    return None
