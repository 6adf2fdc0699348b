"""WF4xx — kernel-language limits (checklist §4, §5, §6), and the kernel-body helpers that the
WF7xx/WF8xx rules share: which kernels and funcs run under a tape, loop classification, and a
small local data-flow over a kernel body.

Reach policy (all kernel-body rules). A definition is *taped* when a launch recorded on a tape
reaches it (the kernel itself, every ``@wp.func`` it calls, transitively, and the
``@wp.func_grad``/``@wp.func_replay`` of those funcs). When the project records launches on a
tape, only taped code is reported. When it has no tape at all (a library, or a module whose
training script is elsewhere), kernel code may still be differentiated by someone else:
error-severity rules then report at warning severity, and warning/info rules stay silent.
Kernels compiled with ``enable_backward=False`` are never reported.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.facts import KernelDef
from warpfix.model.source import SourceFile
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project

MAX_UNROLL = 16  # Warp's default ``max_unroll``

_INT_NAMES = frozenset(
    {"int", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
)
#: Constructors of value types whose components can be assigned (``v[0] = ...``).
_COMPOSITE_CTORS = frozenset(
    {
        "vector", "matrix", "quaternion", "transformation", "vec", "mat", "quat", "transform",
        "identity", "spatial_vector", "spatial_matrix", "spatial_transform",
        *(f"vec{n}{t}" for n in (2, 3, 4) for t in ("", "f", "d", "h", "i", "ui", "b", "ub", "s", "us", "l", "ul")),
        *(f"mat{n}{n}{t}" for n in (2, 3, 4) for t in ("", "f", "d", "h")),
        "mat23", "mat32", "mat34", "mat43", "mat24", "mat42",
        "quatf", "quatd", "quath", "transformf", "transformd", "transformh",
        "spatial_vectorf", "spatial_vectord", "spatial_matrixf", "spatial_matrixd",
    }
)  # fmt: skip
_COMPONENT_ATTRS = {"x": 0, "y": 1, "z": 2, "w": 3}
#: Builtins whose result is always a vector/matrix/quaternion/transform.
_COMPOSITE_RESULTS = frozenset(
    {
        "cross", "normalize", "outer", "transpose", "inverse", "skew", "quat_rotate", "quat_rotate_inv",
        "quat_inverse", "quat_from_axis_angle", "quat_from_matrix", "quat_to_matrix", "transform_point",
        "transform_vector", "transform_get_translation", "transform_get_rotation", "transform_inverse",
        "transform_multiply", "cw_mul", "cw_div", "diag",
    }
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Which code runs under a tape
# ---------------------------------------------------------------------------------------------
def _callee_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def function_body_nodes(fn: ast.FunctionDef) -> Iterator[ast.AST]:
    """Every node of ``fn``'s body, not descending into nested definitions."""
    stack: list[ast.AST] = list(reversed(fn.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


@dataclass
class TapeReach:
    """Which kernel definitions run under a tape (see the module docstring)."""

    recorded_launches: bool  # the model saw at least one launch recorded on a tape
    taped: set[int] = field(default_factory=set)  # id() of reached KernelDefs
    no_backward: set[str] = field(default_factory=set)  # files that switch backward code off

    def severity(self, kd: KernelDef, rule_severity: Severity) -> Severity | None:
        """The severity to report a finding in ``kd`` with, or None to stay silent."""
        module_opts = kd.options.get("module_options")
        if (
            kd.options.get("enable_backward") is False
            or (isinstance(module_opts, dict) and module_opts.get("enable_backward") is False)
            or kd.path in self.no_backward
        ):
            return None
        if id(kd) in self.taped:
            return rule_severity
        if self.recorded_launches:
            return None
        return Severity.WARNING if rule_severity is Severity.ERROR else None


_REACH_CACHE: list[tuple[weakref.ref, TapeReach]] = []  # the last project checked (rules share it)


def tape_reach(project: Project) -> TapeReach:
    """Compute (once per project object) which definitions run under a tape."""
    for ref, cached in _REACH_CACHE:
        if ref() is project:
            return cached
    funcs: dict[str, list[KernelDef]] = {}
    customs: dict[str, list[KernelDef]] = {}
    for kd in project.kernels:
        if kd.kind in ("func", "func_native"):
            funcs.setdefault(kd.name, []).append(kd)
        elif kd.kind in ("func_grad", "func_replay") and kd.target:
            customs.setdefault(kd.target, []).append(kd)
    roots: list[KernelDef] = []
    for trace in project.traces:
        for ev in trace.events:
            if ev.kind == "launch" and ev.recorded and ev.kernel is not None:
                roots.append(ev.kernel)
    reach = TapeReach(recorded_launches=bool(roots), no_backward=_backward_disabled_files(project))
    stack = list(roots)
    while stack:
        kd = stack.pop()
        if id(kd) in reach.taped:
            continue
        reach.taped.add(id(kd))
        stack.extend(customs.get(kd.name, []) if kd.kind == "func" else [])
        if not isinstance(kd.node, ast.FunctionDef):
            continue
        for node in function_body_nodes(kd.node):
            if isinstance(node, ast.Call):
                name = _callee_name(node)
                if name is None:
                    continue
                cands = funcs.get(name, [])
                local = [c for c in cands if c.path == kd.path]
                stack.extend(local or cands)
    _REACH_CACHE[:] = [(weakref.ref(project), reach)]
    return reach


def _backward_disabled_files(project: Project) -> set[str]:
    """Files whose module body runs ``wp.set_module_options({"enable_backward": False})`` or
    sets ``wp.config.enable_backward = False``: no adjoint code is compiled for their kernels."""
    out: set[str] = set()
    for path, src in project.files.items():
        for stmt in src.tree.body:
            if (
                isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, ast.Constant)
                and stmt.value.value is False
            ):
                if any(src.warp_name(t) == "config.enable_backward" for t in stmt.targets):
                    out.add(path)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                if (
                    src.is_warp(call.func, "set_module_options")
                    and call.args
                    and isinstance(call.args[0], ast.Dict)
                ):
                    for k, v in zip(call.args[0].keys, call.args[0].values, strict=False):
                        if isinstance(k, ast.Constant) and k.value == "enable_backward":
                            if isinstance(v, ast.Constant) and v.value is False:
                                out.add(path)
    return out


def kernel_defs(project: Project, *kinds: str) -> Iterator[tuple[KernelDef, SourceFile, ast.FunctionDef]]:
    """(definition, its source file, its function node) for every definition of ``kinds``."""
    for kd in project.kernels:
        src = project.files.get(kd.path)
        if kd.kind in kinds and src is not None and isinstance(kd.node, ast.FunctionDef):
            yield kd, src, kd.node


def is_integer_annotation(src: SourceFile, ann: ast.expr | None) -> bool:
    """Whether a parameter annotation is an integer/bool scalar or an array of them."""
    if ann is None:
        return False
    if isinstance(ann, ast.Call):  # wp.array(dtype=int)
        dtype = next(
            (kw.value for kw in ann.keywords if kw.arg == "dtype"), ann.args[0] if ann.args else None
        )
        return is_integer_annotation(src, dtype)
    if isinstance(ann, ast.Subscript):  # wp.array[int], wp.array2d[wp.int32]
        inner = ann.slice.elts[0] if isinstance(ann.slice, ast.Tuple) and ann.slice.elts else ann.slice
        return is_integer_annotation(src, inner)
    if isinstance(ann, ast.Name) and ann.id in ("int", "bool"):
        return True
    name = src.warp_name(ann)
    return name is not None and name.rpartition(".")[2] in _INT_NAMES


def is_array_annotation(src: SourceFile, ann: ast.expr | None) -> bool:
    base = ann.func if isinstance(ann, ast.Call) else ann.value if isinstance(ann, ast.Subscript) else ann
    name = src.warp_name(base) if base is not None else None
    return name is not None and "array" in name.rpartition(".")[2]


# ---------------------------------------------------------------------------------------------
# Loops
# ---------------------------------------------------------------------------------------------
def _max_unroll(kd: KernelDef) -> int:
    for opts in (kd.options, kd.options.get("module_options")):
        if isinstance(opts, dict) and isinstance(opts.get("max_unroll"), int):
            return opts["max_unroll"]
    return MAX_UNROLL


def _module_int(src: SourceFile, name: str) -> int | None:
    for stmt in src.tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in stmt.targets
        ):
            value = stmt.value
            if isinstance(value, ast.Call) and src.is_warp(value.func, "constant") and value.args:
                value = value.args[0]
            if isinstance(value, ast.Constant) and isinstance(value.value, int):
                return value.value
    return None


def local_names(fn: ast.FunctionDef) -> set[str]:
    """Parameters and every name bound inside ``fn``."""
    names = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    for node in function_body_nodes(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def is_dynamic_loop(src: SourceFile, kd: KernelDef, loop: ast.For | ast.While, bound: set[str]) -> bool:
    """Whether Warp generates a dynamic (not unrolled) loop: a ``while``, or a ``range`` whose
    bounds depend on launch-time values (parameters, locals, array shapes), or a constant range
    longer than ``max_unroll`` or containing ``break``. Bounds Warp folds at codegen time
    (literals, module constants, closure values, ``wp.static(...)``) give a static loop."""
    if isinstance(loop, ast.While):
        return True
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
        return not (isinstance(it, ast.Call) and src.is_warp(it.func, "static"))
    values: list[int | None] = []
    for arg in it.args:
        if isinstance(arg, ast.Call) and src.is_warp(arg.func, "static"):
            return False  # a loop with static expressions is always unrolled
        ids = [n.id for n in ast.walk(arg) if isinstance(n, ast.Name)]
        if any(i in bound for i in ids) or any(isinstance(n, ast.Call) for n in ast.walk(arg)):
            return True
        try:
            values.append(int(ast.literal_eval(arg)))
        except (ValueError, TypeError, SyntaxError):
            values.append(_module_int(src, arg.id) if isinstance(arg, ast.Name) else None)
    if any(isinstance(n, ast.Break) for n in ast.walk(loop)):
        return True
    if None in values or not values:
        return False  # a closure/global constant of unknown value: Warp unrolls it when small
    return len(range(*values)) > _max_unroll(kd)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Local data-flow over one kernel/func body
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dep:
    """How a value depends on one gradient-carrying source: through a smooth path, and/or only
    through the listed piecewise-constant nodes (``wp.floor``, comparisons, int casts)."""

    smooth: bool
    flats: frozenset[ast.AST] = frozenset()

    def merge(self, other: Dep) -> Dep:
        return Dep(self.smooth or other.smooth, self.flats | other.flats)


Deps = dict[str, Dep]
FLAT_CALLS = frozenset({"round", "rint", "floor", "ceil", "trunc", "sign", "step", *_INT_NAMES})
_NO_VALUE_CALLS = frozenset({"tid", "len", "shape", "static"})


def _merge_into(out: Deps, more: Deps) -> None:
    for k, d in more.items():
        out[k] = out[k].merge(d) if k in out else d


class Flow:
    """Flow-insensitive def-use facts of one kernel/func body: which gradient-carrying sources
    (non-integer array parameters of a kernel; non-integer parameters of a func) each
    expression depends on, and how."""

    def __init__(self, src: SourceFile, kd: KernelDef, fn: ast.FunctionDef) -> None:
        self.src = src
        self.kd = kd
        self.fn = fn
        args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        self.params = {a.arg: a.annotation for a in args}
        self.sources: set[str] = set()
        for a in args:
            if is_integer_annotation(src, a.annotation):
                continue
            # Kernel adjoints reach the caller only through arrays (held directly or in a
            # struct); a func's adjoints flow back through every parameter.
            if (
                kd.kind != "kernel"
                or is_array_annotation(src, a.annotation)
                or _is_struct_ann(src, a.annotation)
            ):
                self.sources.add(a.arg)
        self.assigns: dict[str, list[ast.expr]] = {}
        self.loop_vars: set[str] = set()
        for node in function_body_nodes(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    self._bind(t, node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                combined = ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
                self.assigns.setdefault(node.target.id, []).append(ast.copy_location(combined, node))
            elif isinstance(node, ast.For):
                self.loop_vars.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        self._memo: dict[str, Deps] = {}
        self._busy: set[str] = set()

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.assigns.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            for i, t in enumerate(target.elts):
                self._bind(t, elts[i] if elts is not None and i < len(elts) else value)

    def call_name(self, node: ast.Call) -> str | None:
        """The short name of a called function: warp builtins by their warp name, builtins by name."""
        wn = self.src.warp_name(node.func)
        if wn is not None:
            return wn.rpartition(".")[2]
        if isinstance(node.func, ast.Name):
            return node.func.id
        return None

    def deps(self, e: ast.expr) -> Deps:
        """The gradient-carrying sources ``e`` depends on (array indices do not count)."""
        if isinstance(e, ast.Name):
            if e.id in self.loop_vars:
                return {}
            if e.id in self.sources and e.id not in self.assigns:
                return {e.id: Dep(True)}
            if e.id in self._memo:
                return self._memo[e.id]
            if e.id in self._busy:
                return {}
            self._busy.add(e.id)
            out: Deps = {e.id: Dep(True)} if e.id in self.sources else {}
            for v in self.assigns.get(e.id, []):
                _merge_into(out, self.deps(v))
            self._busy.discard(e.id)
            self._memo[e.id] = out
            return out
        if isinstance(e, ast.Subscript):
            return self.deps(e.value)
        if isinstance(e, ast.Attribute):
            return {} if e.attr == "shape" else self.deps(e.value)
        if isinstance(e, ast.Constant):
            return {}
        if isinstance(e, ast.Call):
            name = self.call_name(e)
            if name in _NO_VALUE_CALLS:
                return {}
            out = {}
            for a in [*e.args, *(k.value for k in e.keywords)]:
                _merge_into(out, self.deps(a))
            if name in FLAT_CALLS:
                return _flatten(out, e)
            return out
        if isinstance(e, (ast.Compare, ast.BoolOp)) or (
            isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not)
        ):
            out = {}
            for child in ast.iter_child_nodes(e):
                if isinstance(child, ast.expr):
                    _merge_into(out, self.deps(child))
            return _flatten(out, e)
        out = {}
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                _merge_into(out, self.deps(child))
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.FloorDiv):
            return _flatten(out, e)
        return out

    def carries_gradient(self, e: ast.expr) -> bool:
        return bool(self.deps(e))

    def depends_on(self, e: ast.expr, names: set[str], _seen: set[str] | None = None) -> str | None:
        """The first of ``names`` whose value ``e`` reads (through locals; indices excluded)."""
        seen = _seen if _seen is not None else set()
        if isinstance(e, ast.Name):
            if e.id in names:
                return e.id
            if e.id in seen or e.id in self.loop_vars:
                return None
            seen.add(e.id)
            for v in self.assigns.get(e.id, []):
                hit = self.depends_on(v, names, seen)
                if hit:
                    return hit
            return None
        if isinstance(e, ast.Subscript):
            return self.depends_on(e.value, names, seen)
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                hit = self.depends_on(child, names, seen)
                if hit:
                    return hit
        return None


def _is_struct_ann(src: SourceFile, ann: ast.expr | None) -> bool:
    """A user type (a ``@wp.struct``): neither a warp type nor a Python builtin scalar."""
    if ann is None or src.warp_name(ann) is not None:
        return False
    return not (isinstance(ann, ast.Name) and ann.id in ("float", "int", "bool"))


def _flatten(deps: Deps, node: ast.AST) -> Deps:
    return {k: Dep(False, d.flats | {node}) for k, d in deps.items()}


# ---------------------------------------------------------------------------------------------
# WF401
# ---------------------------------------------------------------------------------------------
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

    def check(self, project: Project) -> Iterator[Finding]:
        reach = tape_reach(project)
        for kd, src, fn in kernel_defs(project, "kernel", "func"):
            severity = reach.severity(kd, self.severity)
            if severity is None:
                continue
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


# ---------------------------------------------------------------------------------------------
# WF402
# ---------------------------------------------------------------------------------------------
def _component_key(src: SourceFile, target: ast.expr) -> tuple[str, str] | None:
    """(local name, component) for ``v[0]``, ``m[1, 2]``, ``m[1][2]``, ``v.x``; None otherwise
    (and for a component whose index is not a constant)."""
    parts: list[str] = []
    node = target
    while True:
        if isinstance(node, ast.Subscript):
            try:
                index = ast.literal_eval(node.slice)
            except (ValueError, TypeError, SyntaxError):
                return None
            parts.extend(repr(i) for i in reversed(index if isinstance(index, tuple) else (index,)))
            node = node.value
        elif isinstance(node, ast.Attribute) and node.attr in _COMPONENT_ATTRS:
            parts.append(repr(_COMPONENT_ATTRS[node.attr]))
            node = node.value
        else:
            break
    if not parts or not isinstance(node, ast.Name):
        return None
    return node.id, ",".join(reversed(parts))


def _kernel_overwrites(kd: KernelDef) -> bool:
    for opts in (kd.options, kd.options.get("module_options")):
        if isinstance(opts, dict) and opts.get("enable_vector_component_overwrites") is True:
            return True
    return False


def _project_overwrites(project: Project) -> bool:
    """Whether ``wp.config.enable_vector_component_overwrites = True`` or a module option turns
    on the copy-on-write lowering somewhere in the project."""
    for src in project.files.values():
        for node in src.nodes_of(ast.Assign):
            if (
                isinstance(node.value, ast.Constant)
                and node.value.value is True
            ):
                if any(src.warp_name(t) == "config.enable_vector_component_overwrites" for t in node.targets):
                    return True
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Dict):
                if not src.is_warp(node.func, "set_module_options"):
                    continue
                opts = node.args[0]
                for k, v in zip(opts.keys, opts.values, strict=False):
                    if (
                        isinstance(k, ast.Constant)
                        and k.value == "enable_vector_component_overwrites"
                        and isinstance(v, ast.Constant)
                        and v.value is True
                    ):
                        return True
    return False


class _ComponentWrites:
    """Walks a body in statement order tracking which components of each composite local hold a
    value that carries a gradient: set by a plain ``=`` component write, or by the binding of
    the local itself (a load, arithmetic, a constructor argument that is not a constant). A
    later ``=`` to such a component is a hit. A rebinding resets the local; ``if``/``else``
    branches are alternatives; a loop body runs twice (a component written in a loop over a
    value defined outside it is written again on the next iteration)."""

    ALL = "*"  # every component

    def __init__(self, src: SourceFile, flow: Flow, composites: set[str]) -> None:
        self.src = src
        self.flow = flow
        self.composites = composites
        self.hits: dict[int, tuple[ast.stmt, str, str, ast.stmt]] = {}

    def run(self, fn: ast.FunctionDef) -> None:
        state = {
            (a.arg, self.ALL): fn
            for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            if a.arg in self.composites and a.arg in self.flow.sources
        }
        self.block(fn.body, state)

    def block(self, body: list[ast.stmt], state: dict[tuple[str, str], ast.stmt]) -> dict:
        for s in body:
            state = self.stmt(s, state)
        return state

    def _bound_components(self, value: ast.expr) -> list[str]:
        """The components a binding ``v = value`` fills with gradient-carrying values."""
        if isinstance(value, ast.Call) and _names_composite(self.src, value.func):
            args = value.args
            name = (self.src.warp_name(value.func) or "").rpartition(".")[2]
            if len(args) > 1 and name.startswith(("vec", "quat", "spatial_vector")):
                return [repr(k) for k, a in enumerate(args) if self.flow.carries_gradient(a)]
            return [self.ALL] if any(self.flow.carries_gradient(a) for a in args) else []
        return [self.ALL] if self.flow.carries_gradient(value) else []

    def stmt(self, s: ast.stmt, state: dict) -> dict:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                rebound = [t] if isinstance(t, ast.Name) else list(t.elts) if isinstance(t, ast.Tuple) else []
                for n in rebound:
                    if isinstance(n, ast.Name):
                        state = {k: v for k, v in state.items() if k[0] != n.id}
                if isinstance(t, ast.Name) and t.id in self.composites and s.value is not None:
                    state = {**state, **{(t.id, c): s for c in self._bound_components(s.value)}}
                    continue
                key = _component_key(self.src, t)
                if key is None or key[0] not in self.composites:
                    continue
                earlier = state.get(key) or state.get((key[0], self.ALL))
                if earlier is not None:
                    self.hits.setdefault(id(s), (s, key[0], key[1], earlier))
                state = {**state, key: state.get(key, s)}
            return state
        if isinstance(s, ast.If):
            a = self.block(s.body, dict(state))
            b = self.block(s.orelse, dict(state))
            return {**b, **a}
        if isinstance(s, (ast.For, ast.While)):
            once = self.block(s.body, dict(state))
            twice = self.block(s.body, dict(once))
            return self.block(s.orelse, twice)
        if isinstance(s, ast.With):
            return self.block(s.body, state)
        return state


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

    def check(self, project: Project) -> Iterator[Finding]:
        if _project_overwrites(project):
            return
        for kd, src, fn, severity in iter_taped(project, self.severity):
            if _kernel_overwrites(kd):
                continue
            composites = _composite_locals(src, kd, fn)
            if not composites:
                continue
            walker = _ComponentWrites(src, Flow(src, kd, fn), composites)
            walker.run(fn)
            for stmt, var, comp, first in sorted(walker.hits.values(), key=lambda h: h[0].lineno):
                where = f"{kd.kind} `{kd.name}`"
                if first is stmt:
                    what = f"component {comp} of local `{var}` in {where} is assigned on every loop iteration"
                elif _component_key(src, _target(first)) is not None:
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


def _target(stmt: ast.stmt) -> ast.expr:
    if isinstance(stmt, ast.Assign):
        return stmt.targets[0]
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        return stmt.target
    return ast.Constant(None)


def _composite_locals(src: SourceFile, kd: KernelDef, fn: ast.FunctionDef) -> set[str]:
    """Locals bound to a vector/matrix/quaternion/transform value: from a constructor call, or
    a load of an array element whose dtype is such a type; func parameters of such types."""
    out: set[str] = set()
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    anns = {a.arg: a.annotation for a in args}
    for a in args:
        if kd.kind == "func" and _names_composite(src, a.annotation):
            out.add(a.arg)
    assigns = [
        (node.targets if isinstance(node, ast.Assign) else [node.target], node.value)
        for node in function_body_nodes(fn)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
    ]

    def composite(value: ast.expr) -> bool:
        if isinstance(value, ast.Call):
            wn = src.warp_name(value.func)
            return _names_composite(src, value.func) or (
                wn is not None and wn.rpartition(".")[2] in _COMPOSITE_RESULTS
            )
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            ann = anns.get(value.value.id)
            return ann is not None and is_array_annotation(src, ann) and _array_of_composite(src, ann)
        if isinstance(value, ast.BinOp):  # vector arithmetic: d = p[i + 1] - p[i], v = 0.5 * (a + b)
            return composite(value.left) or composite(value.right)
        if isinstance(value, ast.Name):
            return value.id in out
        return False

    changed = True
    while changed:
        changed = False
        for targets, value in assigns:
            names = {t.id for t in targets if isinstance(t, ast.Name)} - out
            if names and composite(value):
                out |= names
                changed = True
    return out


def _names_composite(src: SourceFile, node: ast.expr | None) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Call):  # wp.types.vector(length=5, dtype=float)(...)
        return _names_composite(src, node.func)
    name = src.warp_name(node)
    if name is not None:
        return name.rpartition(".")[2] in _COMPOSITE_CTORS
    if isinstance(node, ast.Name):  # a module-level alias: vec5 = wp.types.vector(length=5, dtype=float)
        for stmt in src.tree.body:
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets
            ):
                return isinstance(stmt.value, ast.Call) and _names_composite(src, stmt.value.func)
    return False


def _array_of_composite(src: SourceFile, ann: ast.expr) -> bool:
    if isinstance(ann, ast.Call):
        dtype = next(
            (kw.value for kw in ann.keywords if kw.arg == "dtype"), ann.args[0] if ann.args else None
        )
    elif isinstance(ann, ast.Subscript):
        dtype = ann.slice.elts[0] if isinstance(ann.slice, ast.Tuple) and ann.slice.elts else ann.slice
    else:
        return False
    ndim = 1
    base = ann.func if isinstance(ann, ast.Call) else ann.value
    wn = src.warp_name(base) or ""
    if wn.endswith(("array2d", "array3d", "array4d")):
        ndim = int(wn[-2])
    return ndim == 1 and _names_composite(src, dtype)


# ---------------------------------------------------------------------------------------------
# WF403
# ---------------------------------------------------------------------------------------------
_LINEAR_CALLS = frozenset(
    {
        "float", "float16", "float32", "float64", "add", "sub", "neg", "pos", "min", "max",
        "atomic_add", "atomic_sub", "copy", "transpose", "static", "extract",
        "tile_store", "tile_atomic_add", "tile_sum", "tile_transpose", "tile_broadcast", "tile_reshape",
        "tile_squeeze", "tile_view", "tile", "untile", "tile_astype",
    }
    | _COMPOSITE_CTORS
)  # fmt: skip


def adjoint_reads(flow: Flow, node: ast.expr) -> list[tuple[ast.expr, list[ast.expr]]]:
    """For a non-linear expression: (operand, the expressions whose values its adjoint reads)."""
    if isinstance(node, ast.BinOp):
        left, right = node.left, node.right
        if isinstance(node.op, (ast.Mult, ast.MatMult)):
            return [(left, [right]), (right, [left])]
        if isinstance(node.op, ast.Div):
            return [(left, [right]), (right, [left, right])]
        if isinstance(node.op, (ast.Pow, ast.Mod)):
            return [(left, [left, right]), (right, [left, right])]
        return []
    if isinstance(node, ast.Call):
        name = flow.call_name(node)
        if name is None or name in _LINEAR_CALLS or name in FLAT_CALLS or name in _NO_VALUE_CALLS:
            return []
        args = list(node.args)
        if name in ("where", "select") and len(args) == 3:
            return [(args[1], [args[0]]), (args[2], [args[0]])]
        return [(a, args) for a in args]
    return []


@dataclass
class LoopHazard:
    loop: ast.For | ast.While
    stmt: ast.stmt
    node: ast.expr
    carried: str
    operand: ast.expr
    after: bool  # used after the loop (True) or inside it (False)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for s in body:
        yield s
        for field_name in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(s, field_name, []) or [])


def _exprs_of(stmt: ast.stmt) -> Iterator[ast.expr]:
    """The expressions evaluated by ``stmt`` itself (not by nested statements), with augmented
    assignments expanded to their binary operation."""
    if isinstance(stmt, ast.AugAssign):
        load = ast.Name(stmt.target.id, ast.Load()) if isinstance(stmt.target, ast.Name) else stmt.target
        yield ast.copy_location(ast.BinOp(load, stmt.op, stmt.value), stmt)
        return
    for field_name, value in ast.iter_fields(stmt):
        if field_name in ("body", "orelse", "finalbody", "targets", "target"):
            continue
        if isinstance(value, ast.expr):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, ast.expr))
    for t in getattr(stmt, "targets", []) or [getattr(stmt, "target", None)]:
        if isinstance(t, ast.Subscript):
            yield t.slice


def dynamic_loop_hazards(src: SourceFile, kd: KernelDef, fn: ast.FunctionDef) -> Iterator[LoopHazard]:
    """Adjoints that read a value a dynamic loop carries across iterations (inside the loop),
    or that the loop computed (after it): backward sees the wrong value of it."""
    flow = Flow(src, kd, fn)
    bound = local_names(fn)
    stmts = list(_statements(fn.body))
    order = {id(s): n for n, s in enumerate(stmts)}
    seen: set[int] = set()
    for loop in stmts:
        if not isinstance(loop, (ast.For, ast.While)) or not is_dynamic_loop(src, kd, loop, bound):
            continue
        inner = list(_statements(loop.body))
        inner_ids = {id(s) for s in inner}
        assigned_in = {
            n.id
            for s in inner
            for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        before = {n for s in stmts[: order[id(loop)]] for n in _stored_names(s)}
        carried = (assigned_in & before) - flow.loop_vars
        if not carried:
            continue
        after = [
            s
            for s in stmts[order[id(loop)] + 1 :]
            if id(s) not in inner_ids and s.lineno > (loop.end_lineno or 0)
        ]
        # Backward re-runs the iterations in reverse order, each starting from the carried values
        # of the *forward* iteration with the same rank. A body that uses its loop variable sees
        # misaligned iterations; one that does not is consistent except for reads of a carried
        # local that precede its update in the iteration (the adjoint reads the updated value).
        targets = _names_of(loop.target) if isinstance(loop, ast.For) else set()
        uses_index = any(
            isinstance(n, ast.Name) and n.id in targets and isinstance(n.ctx, ast.Load)
            for s in loop.body
            for n in ast.walk(s)
        )
        last_update = {
            c: max((i for i, s in enumerate(inner) if c in _stored_names(s)), default=len(inner))
            for c in carried
        }
        # Each reverse iteration replays the body before its adjoints, so inside the loop only a
        # local that an iteration reads before it assigns it is carried (`j = start + i` is not);
        # after the loop every local the loop assigns still has its pre-loop value in backward.
        carried_in_body = _read_before_assigned(inner, carried)
        for stmt_list, is_after in ((inner, False), (after, True)):
            for pos, stmt in enumerate(stmt_list):
                if id(stmt) in seen:
                    continue
                live = carried if is_after else carried_in_body
                if not is_after and not uses_index and isinstance(loop, ast.For):
                    live = {c for c in carried if last_update[c] >= pos}
                hazard = _first_hazard(flow, stmt, live) if live else None
                if hazard is not None:
                    seen.add(id(stmt))
                    node, name, operand = hazard
                    yield LoopHazard(loop, stmt, node, name, operand, is_after)


def _read_before_assigned(body: list[ast.stmt], names: set[str]) -> set[str]:
    """The ``names`` an iteration of ``body`` (statements in execution order) reads before it assigns them."""
    out: set[str] = set()
    assigned: set[str] = set()
    for s in body:
        if isinstance(s, (ast.If, ast.While)):
            parts: list[ast.AST] = [s.test]
        elif isinstance(s, ast.For):
            parts = [s.iter]
        elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
            parts = [s]
        else:
            parts = []
        loads = {n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if isinstance(s, ast.AugAssign):
            loads |= _names_of(s.target)
        out |= (loads & names) - assigned
        assigned |= _stored_names(s)
    return out


def _names_of(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _stored_names(stmt: ast.stmt) -> set[str]:
    """Names bound by ``stmt`` itself (not by statements nested in it)."""
    if isinstance(stmt, ast.Assign):
        targets: list[ast.expr] = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For)):
        targets = [stmt.target]
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _gradient_array(flow: Flow, node: ast.expr) -> bool:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return (
        isinstance(node, ast.Name)
        and node.id in flow.sources
        and is_array_annotation(flow.src, flow.params.get(node.id))
    )


def _index_hazard(flow: Flow, stmt: ast.stmt, carried: set[str]) -> tuple[ast.expr, str] | None:
    """An element of a gradient-carrying array addressed by a carried index: its adjoint is
    read from / scattered to the element the stale index names."""
    roots: list[ast.AST] = list(_exprs_of(stmt))
    roots += getattr(stmt, "targets", []) or (
        [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) else []
    )
    for root in roots:
        for node in ast.walk(root):
            if isinstance(node, ast.Subscript) and _gradient_array(flow, node.value):
                hit = flow.depends_on(node.slice, carried)
            elif (
                isinstance(node, ast.Call)
                and flow.call_name(node) in ("atomic_add", "atomic_sub")
                and len(node.args) > 2
                and _gradient_array(flow, node.args[0])
            ):
                hit = next(filter(None, (flow.depends_on(a, carried) for a in node.args[1:-1])), None)
            else:
                continue
            if hit:
                return node, hit
    return None


def _first_hazard(flow: Flow, stmt: ast.stmt, carried: set[str]) -> tuple[ast.expr, str, ast.expr] | None:
    indexed = _index_hazard(flow, stmt, carried)
    if indexed is not None:
        return indexed[0], indexed[1], indexed[0]
    for expr in _exprs_of(stmt):
        for node in ast.walk(expr):
            if not isinstance(node, ast.expr):
                continue
            for operand, reads in adjoint_reads(flow, node):
                if not flow.carries_gradient(operand):
                    continue
                for r in reads:
                    hit = flow.depends_on(r, carried)
                    if hit:
                        return node, hit, operand
    return None


class DynamicLoopCarry(Rule):
    id = "WF403"
    name = "dynamic-loop-carry"
    severity = Severity.ERROR
    fix_safety = FixSafety.NONE
    fix_description = (
        "make the loop bound static (wp.static / a constant <= max_unroll), or accumulate additively "
        "(the exponent, for a product of exp) into an array and finish in a second kernel"
    )
    doc = RuleDoc(
        what=(
            "Flags, in a loop whose trip count is not a compile-time constant, an operation whose "
            "adjoint needs a value the loop carries across iterations (`p = p * x[j]`, "
            "`s += w * x[j]` with `w` updated in the loop), and a loop-computed value used "
            "non-linearly after the loop (`s / norm`)."
        ),
        why=(
            "Backward does not record dynamic loops: it re-runs the iterations in reverse order "
            "without restoring carried locals, so an adjoint inside the loop reads another value of "
            "them than the forward pass used, and code after the loop sees their value from before "
            "the loop. The "
            "product of `x = [2, 2, 2]` gets gradient `[32, 8, 2]` instead of `[4, 4, 4]`; "
            "`sum / norm` gets inf. Additive accumulation (`s += f(x[j])`) and static loops are fine."
        ),
        example="""
@wp.kernel
def product(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    p = float(1.0)
    for j in range(n):
        p = p * x[j]
    out[0] = p
""",
        use_instead="""
@wp.kernel
def product(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    p = float(1.0)
    for j in range(wp.static(N)):   # static trip count: unrolled, replayed exactly
        p = p * x[j]
    out[0] = p
""",
        fix=(
            "None automatically: the right rewrite depends on the loop (a static bound; an additive "
            "accumulation stored to an array and used non-linearly only by a later kernel, since the "
            "same kernel would read it stale after the loop; or per-iteration values in an array)."
        ),
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.kernel
def energy(x: wp.array(dtype=float), n: int, damp: float, out: wp.array(dtype=float)):
    s = float(0.0)
    v = float(0.0)
    for j in range(n):
        s += x[j] * x[j]
        v = v * damp + x[j]
    out[0] = s * 0.5 + v

@wp.kernel
def product3(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    p = float(1.0)
    for j in range(3):
        p = p * x[j]
    out[0] = p

x = wp.ones(3, dtype=float, requires_grad=True)
out = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(energy, dim=1, inputs=[x, 3, 0.9], outputs=[out])
    wp.launch(product3, dim=1, inputs=[x], outputs=[out])
""",
            note="additive accumulation, linear recurrence, static loop",
        ),
        Example(
            """
import warp as wp

@wp.kernel
def joint_energy(q: wp.array(dtype=float), start: int, n: int, out: wp.array(dtype=float)):
    j = int(0)
    c = float(0.0)
    for i in range(n):
        j = start + i
        c = wp.sin(q[j])
        wp.atomic_add(out, 0, c * c)

q = wp.ones(8, dtype=float, requires_grad=True)
out = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(joint_energy, dim=1, inputs=[q, 2, 4], outputs=[out])
""",
            note="locals rebound at the top of every iteration are not carried: backward replays the body",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.kernel
def product(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    p = float(1.0)
    for j in range(n):
        p = p * x[j]  # expect: WF403
    out[0] = p

@wp.kernel
def normalized(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    s = float(0.0)
    norm = float(0.0)
    for j in range(x.shape[0]):
        s += x[j]
        norm += x[j] * x[j]
    out[0] = s / wp.sqrt(norm)  # expect: WF403

x = wp.ones(3, dtype=float, requires_grad=True)
out = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(product, dim=1, inputs=[x, 3], outputs=[out])
    wp.launch(normalized, dim=1, inputs=[x], outputs=[out])
""",
        ),
        Example(
            """
import warp as wp

@wp.kernel
def snap(p: wp.array(dtype=float), q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    best = float(1.0e10)
    k = int(0)
    for j in range(q.shape[0]):
        d = (p[i] - q[j]) * (p[i] - q[j])
        if d < best:
            best = d
            k = j
    wp.atomic_add(loss, 0, (p[i] - q[k]) * (p[i] - q[k]))  # expect: WF403

p = wp.ones(4, dtype=float, requires_grad=True)
q = wp.ones(8, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(snap, dim=4, inputs=[p, q], outputs=[loss])
""",
            note="an index chosen in a dynamic loop and used after it",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        reach = tape_reach(project)
        for kd, src, fn in kernel_defs(project, "kernel", "func"):
            severity = reach.severity(kd, self.severity)
            if severity is None:
                continue
            for h in dynamic_loop_hazards(src, kd, fn):
                code = ast.unparse(h.node)
                loop_line = h.loop.lineno
                if h.operand is h.node:
                    when = "after" if h.after else "inside"
                    why = (
                        f"`{code}` {when} the dynamic loop at line {loop_line} is addressed by `{h.carried}`, "
                        f"which that loop carries; backward does not restore `{h.carried}`, so the adjoint "
                        f"goes to another element than the forward pass read"
                    )
                elif h.after:
                    why = (
                        f"`{h.carried}` is computed by the dynamic loop at line {loop_line}; backward does "
                        f"not replay that loop before this code, so the adjoint of `{code}` reads "
                        f"`{h.carried}` as it was before the loop"
                    )
                else:
                    why = (
                        f"the adjoint of `{code}` reads `{h.carried}`, which the dynamic loop at line "
                        f"{loop_line} carries from one iteration to the next; backward re-runs the iterations "
                        f"in reverse order without restoring `{h.carried}`, so it reads another value than "
                        f"the forward pass used"
                    )
                yield self.finding(
                    src.span(h.stmt),
                    f"in {kd.kind} `{kd.name}`: {why}",
                    severity=severity,
                    data={
                        "kernel": kd.name,
                        "carried": h.carried,
                        "loop_line": loop_line,
                        "after_loop": h.after,
                    },
                    related=((src.span(h.loop), "dynamic loop (trip count not a compile-time constant)"),),
                )


def iter_taped(
    project: Project, rule_severity: Severity, kinds: Iterable[str] = ("kernel", "func")
) -> Iterator[tuple[KernelDef, SourceFile, ast.FunctionDef, Severity]]:
    """The definitions a kernel-body rule should look at, with the severity to report at."""
    reach = tape_reach(project)
    for kd, src, fn in kernel_defs(project, *kinds):
        severity = reach.severity(kd, rule_severity)
        if severity is not None:
            yield kd, src, fn, severity
