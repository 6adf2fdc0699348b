"""A small local data-flow over a kernel body (which names a value depends on, through which
calls), type-annotation tests, and the call/name helpers the kernel-body rules (WF4xx, WF7xx,
WF8xx) share."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from warpfix.model.facts import KernelDef
from warpfix.model.reach import function_body_nodes
from warpfix.model.source import SourceFile

_INT_NAMES = frozenset(
    {"int", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
)
#: Constructors of value types whose components can be assigned (``v[0] = ...``).
COMPOSITE_CTORS = frozenset(
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
NO_VALUE_CALLS = frozenset({"tid", "len", "shape", "static"})


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
            if name in NO_VALUE_CALLS:
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


def call_short_name(src: SourceFile, func: ast.expr) -> str | None:
    wn = src.warp_name(func)
    return wn.rpartition(".")[2] if wn is not None else None


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
