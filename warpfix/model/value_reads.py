"""What a kernel or a host event does to the arrays it is bound to: which it reads by value (the
adjoint needs the contents: a non-linear use, a branch, an index; see :class:`_Sensitivity`),
which it overwrites, and which it accumulates into. The facts :mod:`warpfix.model.hazards` pairs
into write-after-read hazards."""

from __future__ import annotations

import ast

from warpfix.finding import Span
from warpfix.model.facts import Buffer, Event, KernelDef
from warpfix.model.memo import IdentityMemo

_OVERWRITE_KINDS = ("write", "rmw", "inplace_mul")


# -- kernel facts ------------------------------------------------------------------------------
def value_read_params(kd: KernelDef) -> set[str]:
    """Array parameters (and struct fields) whose *incoming* contents the kernel reads.

    A read of an index that the kernel itself wrote before (write-then-read) does not count, and
    neither does accumulation (``+=``, ``wp.atomic_add``), whose adjoint does not need the value.
    """
    out: set[str] = set()
    for name, facts in kd.params.items():
        if not facts.is_array:
            continue
        written: set[str] = set()
        for acc in facts.accesses:
            if acc.kind in ("read", "rmw", "inplace_mul") and acc.index not in written:
                out.add(name)
                break
            if acc.kind in ("write", "rmw", "inplace_mul"):
                written.add(acc.index)
    return out


_LINEAR_CALLS = {
    # constructors and casts between float types: linear in every argument
    "vec2",
    "vec3",
    "vec4",
    "vector",
    "mat22",
    "mat33",
    "mat44",
    "matrix",
    "quat",
    "quaternion",
    "spatial_vector",
    "transform",
    "float32",
    "float64",
    "float16",
    "vec2f",
    "vec3f",
    "vec4f",
    "vec2d",
    "vec3d",
    "vec4d",
    "mat22f",
    "mat33f",
    "mat44f",
    "spatial_vectorf",
    "transformf",
    "quatf",
    "neg",
    "add",
    "sub",
    "transpose",
    "spatial_top",
    "spatial_bottom",
    "transform_get_translation",
}
_BILINEAR_CALLS = {"dot", "cross", "outer", "mul", "ddot", "spatial_dot", "spatial_cross", "tile_matmul"}
# tile primitives whose adjoint needs no input values (moves, stores and linear transforms)
_TILE_LINEAR = {"tile_load", "tile_store", "tile_atomic_add", "tile_fft", "tile_ifft", "tile_transpose",
                "tile_broadcast", "tile_view", "tile_add", "tile_neg", "tile_zeros", "tile_ones"}


class _Sensitivity:
    """Which array parameters' *values* a kernel's adjoint needs.

    A value read from a parameter (``x[i]``, ``s.f[i]``) taints the locals it flows into. The
    parameter is value-sensitive when a tainted value reaches a non-linear operation (a product of
    two tainted values, a division by one, any call not known to be linear), a branch condition,
    a comparison or an index. Purely linear uses (sums, scaling by untainted values, constructors,
    component access) give an adjoint that does not depend on the value read.
    """

    def __init__(self, kd: KernelDef) -> None:
        self.kd = kd
        self.params = {n for n, p in kd.params.items() if p.is_array}
        self.locals: dict[str, set[str]] = {}
        self.sensitive: set[str] = set()

    def run(self) -> set[str]:
        body = getattr(self.kd.node, "body", [])
        for _ in range(2):  # a second pass carries taint around loops
            for stmt in body:
                self.stmt(stmt)
        return self.sensitive

    def param_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name) and node.id in self.params:
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            key = f"{node.value.id}.{node.attr}"
            if key in self.params:
                return key
        return None

    def mark(self, taint: set[str]) -> None:
        self.sensitive |= taint

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            value = s.value
            taint = self.expr(value) if value is not None else set()
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                self.bind(t, taint)
        elif isinstance(s, ast.AugAssign):
            taint = self.expr(s.value)
            if isinstance(s.op, ast.Mult):
                target_taint = self.expr(s.target)
                if taint and target_taint:
                    self.mark(taint | target_taint)
            elif not isinstance(s.op, (ast.Add, ast.Sub)):
                self.mark(taint | self.expr(s.target))
            self.bind(s.target, taint, augment=True)
        elif isinstance(s, (ast.If, ast.While)):
            self.mark(self.expr(s.test))
            for b in [*s.body, *s.orelse]:
                self.stmt(b)
        elif isinstance(s, ast.For):
            self.mark(self.expr(s.iter))
            for b in [*s.body, *s.orelse]:
                self.stmt(b)
        elif isinstance(s, ast.Expr):
            self.expr(s.value)
        elif isinstance(s, ast.Return) and s.value is not None:
            self.mark(self.expr(s.value))
        else:
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.stmt):
                    self.stmt(child)
                elif isinstance(child, ast.expr):
                    self.mark(self.expr(child))

    def bind(self, target: ast.expr, taint: set[str], augment: bool = False) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind(elt, taint, augment)
        elif isinstance(target, ast.Name):
            if augment:
                self.locals.setdefault(target.id, set()).update(taint)
            else:
                self.locals[target.id] = set(taint)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            base: ast.expr = target
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                if isinstance(base, ast.Subscript):
                    self.mark(self.expr(base.slice))
                if self.param_of(base) is not None:
                    return  # a store into an array: its value is not read back through the local
                base = base.value
            if isinstance(base, ast.Name) and base.id not in self.params:
                self.locals.setdefault(base.id, set()).update(taint)

    def expr(self, e: ast.expr | None) -> set[str]:
        if e is None:
            return set()
        if isinstance(e, ast.Subscript):
            self.mark(self.expr(e.slice))
            param = self.param_of(e.value)
            if param is not None:
                return {param}
            return self.expr(e.value)
        if isinstance(e, ast.Name):
            return set(self.locals.get(e.id, set()))
        if isinstance(e, ast.Attribute):
            return set() if self.param_of(e) is not None else self.expr(e.value)
        if isinstance(e, ast.BinOp):
            left, right = self.expr(e.left), self.expr(e.right)
            if isinstance(e.op, (ast.Add, ast.Sub)):
                return left | right
            if isinstance(e.op, ast.Mult):
                if left and right:
                    self.mark(left | right)
                return left | right
            if isinstance(e.op, ast.Div):
                self.mark(right)
                return left | right
            self.mark(left | right)
            return left | right
        if isinstance(e, ast.UnaryOp):
            taint = self.expr(e.operand)
            if isinstance(e.op, ast.Not):
                self.mark(taint)
            return taint
        if isinstance(e, (ast.Compare, ast.BoolOp)):
            children = [e.left, *e.comparators] if isinstance(e, ast.Compare) else e.values
            taint = set().union(*(self.expr(c) for c in children))
            self.mark(taint)
            return taint
        if isinstance(e, ast.IfExp):
            self.mark(self.expr(e.test))
            return self.expr(e.body) | self.expr(e.orelse)
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, (ast.Tuple, ast.List)):
            return set().union(*(self.expr(x) for x in e.elts)) if e.elts else set()
        if isinstance(e, ast.Slice):
            for part in (e.lower, e.upper, e.step):
                self.mark(self.expr(part))
            return set()
        out: set[str] = set()
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                out |= self.expr(child)
        self.mark(out)
        return out

    def call(self, e: ast.Call) -> set[str]:
        func = e.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        args = [self.expr(a) for a in e.args] + [self.expr(k.value) for k in e.keywords]
        taint = set().union(*args) if args else set()
        if name not in ("atomic_add", "atomic_sub", "len", *_TILE_LINEAR):
            # a whole array handed to a function: assume the callee needs its values
            whole = {self.param_of(a) for a in [*e.args, *(k.value for k in e.keywords)]}
            self.mark({p for p in whole if p is not None})
        if name in ("atomic_add", "atomic_sub") and e.args:
            self.mark(set().union(*args[1:-1]) if len(args) > 2 else set())
            return set()
        if name in _LINEAR_CALLS or name in _TILE_LINEAR:
            return taint
        if name in _BILINEAR_CALLS:
            tainted = [a for a in args if a]
            if len(tainted) > 1:
                self.mark(taint)
            return taint
        if name in ("tid", "static", "len"):
            return set()
        self.mark(taint)
        return taint


def _replay_sensitive_params(kd: KernelDef) -> set[str]:
    if not isinstance(kd.node, ast.FunctionDef):
        return set(value_read_params(kd))
    return _Sensitivity(kd).run()


#: Array parameters (and struct fields) whose values the kernel's adjoint needs at any read, a read of an
#: element the kernel stored itself included. Warp's backward replays a kernel's reads but not its stores: a
#: read of ``v[i]`` between ``v[i] = a`` and a later ``v[i] = f(v[i])`` sees the final value there, not ``a``.
replay_sensitive_params: IdentityMemo[KernelDef, set[str]] = IdentityMemo(_replay_sensitive_params, 20_000)


def _value_sensitive_params(kd: KernelDef) -> set[str]:
    return replay_sensitive_params(kd) & value_read_params(kd)


#: Array parameters (and struct fields) whose read values the kernel's adjoint depends on (computed once
#: per kernel: a library kernel is met at every call): the replay-sensitive ones whose incoming contents it reads.
value_sensitive_params: IdentityMemo[KernelDef, set[str]] = IdentityMemo(_value_sensitive_params, 20_000)


def overwritten_params(kd: KernelDef) -> set[str]:
    """Array parameters (and struct fields) that the kernel overwrites (``=``, ``*=``, ``/=``)."""
    return {name for name, p in kd.params.items() if p.is_array and p.has(*_OVERWRITE_KINDS)}


def _stores_by_line(kd: KernelDef) -> dict[int, ast.AST]:
    """Line -> the first assignment or call on it (in ``ast.walk`` order) of ``kd``."""
    by_line: dict[int, ast.AST] = {}
    for node in ast.walk(kd.node):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Call)):
            by_line.setdefault(node.lineno, node)
    return by_line


_stores = IdentityMemo(_stores_by_line, 20_000)


def _statement_at(kd: KernelDef, span: Span) -> ast.AST | None:
    """The first assignment or call (in ``ast.walk`` order) on ``span``'s line of ``kd``."""
    return _stores(kd).get(span.line)


def rmw_store_spans(kd: KernelDef, param: str) -> list[Span]:
    """Spans of ``x[i] = f(x[i])``-style stores of ``param`` (atomic min/max/cas/exch excluded)."""
    spans = []
    for acc in kd.params[param].accesses:
        if acc.kind != "rmw":
            continue
        node = _statement_at(kd, acc.span)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            spans.append(acc.span)
    return spans


def rmw_params(kd: KernelDef) -> dict[str, list[Span]]:
    """Array parameters (``"x"``) and struct fields (``"s.x"``) that the kernel reads and then
    overwrites at the same index, with the store spans."""
    out: dict[str, list[Span]] = {}
    if kd.kind != "kernel":
        return out
    for name, facts in kd.params.items():
        if facts.is_array:
            spans = rmw_store_spans(kd, name)
            if spans:
                out[name] = spans
    return out


# -- event facts -------------------------------------------------------------------------------
def _bound(ev: Event, params: set[str]) -> list[tuple[Buffer, str | None]]:
    return [(ev.binding[p], p) for p in sorted(params) if p in ev.binding]


def event_value_reads(ev: Event) -> list[tuple[Buffer, str | None]]:
    """Buffers whose current contents the event reads (with the kernel parameter for launches)."""
    if ev.kind == "launch":
        return _bound(ev, value_read_params(ev.kernel)) if ev.kernel is not None else []
    if ev.kind in ("copy", "assign", "clone"):
        return [(b, None) for b in ev.reads]
    return []


def event_sensitive_reads(ev: Event) -> list[tuple[Buffer, str | None]]:
    """Buffers whose current contents the event's adjoint needs (copies need none)."""
    if ev.kind == "launch" and ev.kernel is not None:
        return _bound(ev, value_sensitive_params(ev.kernel))
    return []


def event_overwrites(ev: Event) -> list[tuple[Buffer, str | None]]:
    """Existing buffers whose contents the event replaces (accumulation is not an overwrite)."""
    if ev.kind == "launch":
        return _bound(ev, overwritten_params(ev.kernel)) if ev.kernel is not None else []
    if ev.kind in ("copy", "assign", "zero", "fill"):
        return [(b, None) for b in ev.writes]
    return []


def event_modifies(ev: Event) -> list[tuple[Buffer, str | None]]:
    """Buffers the event writes or accumulates into (recorded writes of any kind)."""
    if ev.kind == "launch":
        if ev.kernel is None:
            return []
        params = {n for n, p in ev.kernel.params.items() if p.is_array and p.modified}
        return _bound(ev, params)
    if ev.kind in ("copy", "assign", "zero", "fill"):
        return [(b, None) for b in ev.writes]
    return []


def tape_ids(ev: Event) -> set[int]:
    return {scope.tape for scope in ev.tapes}
