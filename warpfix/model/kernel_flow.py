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


def array_dtype(ann: ast.expr) -> ast.expr | None:
    """The element type of an array annotation: ``wp.array(dtype=int)`` / ``wp.array(int)`` and
    ``wp.array[int]`` / ``wp.array2d[wp.int32, ...]`` give ``int`` / ``wp.int32``; None otherwise."""
    if isinstance(ann, ast.Call):
        return next((kw.value for kw in ann.keywords if kw.arg == "dtype"), ann.args[0] if ann.args else None)
    if isinstance(ann, ast.Subscript):
        return ann.slice.elts[0] if isinstance(ann.slice, ast.Tuple) and ann.slice.elts else ann.slice
    return None


def is_integer_annotation(src: SourceFile, ann: ast.expr | None) -> bool:
    """Whether a parameter annotation is an integer/bool scalar or an array of them."""
    if ann is None:
        return False
    if isinstance(ann, (ast.Call, ast.Subscript)):
        return is_integer_annotation(src, array_dtype(ann))
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


# ---------------------------------------------------------------------------------------------
# Integer read-modify-writes: can the overwritten values reach a gradient?
# ---------------------------------------------------------------------------------------------
def integer_array_text(annotation: str) -> bool:
    """Whether a parameter annotation's source text (``wp.array(dtype=wp.int32)``,
    ``wp.array[wp.int32]``, ``wp.array1d[int]``) declares an array of integers or bools."""
    try:
        dtype = array_dtype(ast.parse(annotation, mode="eval").body)
    except SyntaxError:
        return False
    name = dtype.attr if isinstance(dtype, ast.Attribute) else dtype.id if isinstance(dtype, ast.Name) else None
    return name in _INT_NAMES


class _IntegerTaint:
    """Where the values a kernel loads from one integer array parameter go.

    They carry no gradient themselves; they matter to one when, replayed against overwritten
    contents, they change what the adjoint computes: used as an index of anything but an integer
    array, stored into (or accumulated into) anything but an integer array or a local, handed to a
    non-warp function, or steering a branch or loop that touches a non-integer array or leaves the
    kernel early. Flow-insensitive: a local is tainted when any assignment to it is."""

    def __init__(self, kd: KernelDef, param: str) -> None:
        self.kd = kd
        self.param = param
        self.integer = {n for n, p in kd.params.items() if p.is_array and integer_array_text(p.annotation)}
        self.tainted: set[str] = set()

    def reaches_gradient(self) -> bool:
        body = list(getattr(self.kd.node, "body", []))
        size = -1
        while size != len(self.tainted):  # taint locals to a fixpoint (loops, later assignments)
            size = len(self.tainted)
            self._spread(body, control=False)
        return self._harmful(body, control=False)

    def _array(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name) and node.id in self.kd.params:
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            key = f"{node.value.id}.{node.attr}"
            return key if key in self.kd.params else None
        return None

    def _taints(self, e: ast.expr | None) -> bool:
        if e is None:
            return False
        for node in ast.walk(e):
            if isinstance(node, ast.Name) and node.id in self.tainted:
                return True
            if isinstance(node, ast.Subscript) and self._array(node.value) == self.param:
                return True
        return False

    def _spread(self, stmts: list[ast.stmt], control: bool) -> None:
        for s in stmts:
            if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                if control or self._taints(s.value):
                    targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                                self.tainted.add(n.id)
            elif isinstance(s, (ast.If, ast.While)):
                inner = control or self._taints(s.test)
                self._spread([*s.body, *s.orelse], inner)
            elif isinstance(s, ast.For):
                inner = control or self._taints(s.iter)
                if inner:
                    self.tainted.update(n.id for n in ast.walk(s.target) if isinstance(n, ast.Name))
                self._spread([*s.body, *s.orelse], inner)
            else:
                self._spread([c for c in ast.iter_child_nodes(s) if isinstance(c, ast.stmt)], control)

    def _touches_gradient(self, stmts: list[ast.stmt]) -> bool:
        """A non-integer array access, a non-warp call or an early exit in ``stmts``."""
        for s in stmts:
            for node in ast.walk(s):
                if isinstance(node, (ast.Return, ast.Break, ast.Continue)):
                    return True
                if isinstance(node, ast.Subscript):
                    name = self._array(node.value)
                    if name is not None and name not in self.integer:
                        return True
                if isinstance(node, ast.Call) and not self._warp_call(node):
                    return True
        return False

    @staticmethod
    def _warp_call(node: ast.Call) -> bool:
        """A call of a warp builtin (``wp.*``) or of a Python builtin a kernel may use."""
        root = node.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(node.func, ast.Name):
            return node.func.id in ("range", "int", "float", "bool", "len", "min", "max", "abs")
        return isinstance(root, ast.Name) and root.id in ("wp", "warp")

    def _harmful_expr(self, e: ast.expr | None) -> bool:
        """A tainted value used as an index of a non-integer array, or passed to a non-warp call
        (or to a warp atomic on a non-integer array)."""
        if e is None:
            return False
        for node in ast.walk(e):
            if isinstance(node, ast.Subscript) and self._taints(node.slice):
                name = self._array(node.value)
                if name is None or name not in self.integer:
                    return True
            if isinstance(node, ast.Call) and any(self._taints(a) for a in [*node.args, *(k.value for k in node.keywords)]):
                if not self._warp_call(node):
                    return True
                target = self._array(node.args[0]) if node.args else None
                if target is not None and target not in self.integer:
                    return True
        return False

    def _harmful(self, stmts: list[ast.stmt], control: bool) -> bool:
        for s in stmts:
            if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                if self._harmful_expr(s.value):
                    return True
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    if self._harmful_expr(t):
                        return True
                    if isinstance(t, ast.Name) or (isinstance(t, ast.Subscript) and self._array(t.value) in self.integer):
                        continue
                    if control or self._taints(s.value):
                        return True  # into a non-integer array, a vector component, a struct field
            elif isinstance(s, (ast.If, ast.While, ast.For)):
                head = s.iter if isinstance(s, ast.For) else s.test
                if self._harmful_expr(head):
                    return True
                inner = control or self._taints(head)
                if inner and self._touches_gradient([*s.body, *s.orelse]):
                    return True
                if self._harmful([*s.body, *s.orelse], inner):
                    return True
            elif isinstance(s, ast.Expr):
                if self._harmful_expr(s.value):
                    return True
            else:
                for c in ast.iter_child_nodes(s):
                    if isinstance(c, ast.expr) and self._harmful_expr(c):
                        return True
                if self._harmful([c for c in ast.iter_child_nodes(s) if isinstance(c, ast.stmt)], control):
                    return True
        return False


def integer_rmw_reaches_gradient(kd: KernelDef, param: str) -> bool:
    """Whether the values a kernel reads from the integer array ``param`` (and then overwrites) can
    change any gradient when the backward replays the kernel against the overwritten contents."""
    return _IntegerTaint(kd, param).reaches_gradient()
