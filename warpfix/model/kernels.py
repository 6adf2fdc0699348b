"""Kernel facts: Warp kernels, funcs and structs, and how each array parameter is accessed."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from warpfix.model.facts import Access, AccessKind, KernelDef, KernelKind, LoopKind, ParamFacts
from warpfix.model.source import SourceFile

_DECORATORS: dict[str, KernelKind] = {
    "kernel": "kernel",
    "func": "func",
    "func_grad": "func_grad",
    "func_replay": "func_replay",
    "func_native": "func_native",
    "struct": "struct",
}
_ATOMICS = {"atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_cas", "atomic_exch"}
# tile primitives that access a whole tile of an array argument. ``tile_store`` writes the array (its values
# come from the kernel's inputs: what needs ``requires_grad``) but is no overwrite to the replay analysis: the
# model cannot tell whether the adjoints that read the stored array need its values (the FFT scratch buffers
# Warp's navier-stokes example reuses on purpose).
_TILE_ACCESS: dict[str, AccessKind] = {"tile_load": "read", "tile_atomic_add": "atomic", "tile_store": "tile_store"}
MAX_UNROLL = 16  # Warp's default max_unroll


def _decorator_kind(src: SourceFile, dec: ast.expr) -> tuple[KernelKind | None, ast.Call | None]:
    call = dec if isinstance(dec, ast.Call) else None
    target = dec.func if call else dec
    wn = src.warp_name(target)
    if wn is None:
        return None, None
    return _DECORATORS.get(wn.rpartition(".")[2]), call


def _unparse(node: ast.AST) -> str:
    """``ast.unparse``, without its visitor for the shapes every kernel is full of (a name, a dotted
    name, an int): the same text."""
    cls = node.__class__
    if cls is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if cls is ast.Attribute and node.value.__class__ is ast.Name:  # type: ignore[attr-defined]
        return f"{node.value.id}.{node.attr}"  # type: ignore[attr-defined]
    if cls is ast.Constant and node.value.__class__ is int:  # type: ignore[attr-defined]
        return repr(node.value)  # type: ignore[attr-defined]
    return ast.unparse(node)


def _const(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return node


def find_kernels(src: SourceFile, defs: Iterable[ast.FunctionDef | ast.ClassDef] | None = None
                 ) -> Iterator[KernelDef]:
    """Every decorated Warp definition in the file, at any nesting depth (``defs``: the file's
    ``def`` and ``class`` statements in ``ast.walk`` order, when already known)."""
    consts = _module_int_constants(src)
    for node in src.nodes_of(ast.FunctionDef, ast.ClassDef) if defs is None else defs:
        if not node.decorator_list:
            continue
        for dec in node.decorator_list:
            kind, call = _decorator_kind(src, dec)
            if kind is None:
                continue
            options: dict[str, object] = {}
            target = None
            if call is not None:
                for kw in call.keywords:
                    if kw.arg:
                        options[kw.arg] = _const(kw.value)
                if call.args and kind in ("func_grad", "func_replay"):
                    t = call.args[0]
                    target = t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", None)
                if kind == "func_native":
                    options["snippet"] = call.args[0] if call.args else options.get("snippet")
                    if len(call.args) > 1:
                        options["adj_snippet"] = call.args[1]
            kd = _build(src, node, kind, options, target, consts)
            if call is not None and any(kw.arg == "enable_backward" for kw in call.keywords):
                kd.backward_option = src.span(call)
            yield kd
            break


def _build(
    src: SourceFile,
    node: ast.FunctionDef | ast.ClassDef,
    kind: KernelKind,
    options: dict,
    target: str | None,
    consts: set[str],
) -> KernelDef:
    kd = KernelDef(node.name, kind, src.path, src.span(node), node, {}, options, target, source=src)
    if isinstance(node, ast.ClassDef):
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                kd.struct_fields[stmt.target.id] = _unparse(stmt.annotation)
        return kd
    for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
        ann = _unparse(arg.annotation) if arg.annotation is not None else ""
        is_array = "array" in ann  # wp.array(...), wp.array[...], indexedarray, fabricarray
        kd.params[arg.arg] = ParamFacts(arg.arg, ann, is_array=is_array, is_struct=not is_array)
    _AccessCollector(src, kd, consts).run()
    return kd


class _AccessCollector:
    """Walks a kernel body in statement order and records each access to a parameter."""

    def __init__(self, src: SourceFile, kd: KernelDef, consts: set[str]) -> None:
        self.src = src
        self.kd = kd
        self.loops: list[LoopKind] = []
        self.read_indices: dict[str, set[str]] = {}
        self.consts = consts  # module-level int constants: static loop bounds
        self.calls: list[tuple[str, list[str | None], tuple[LoopKind, ...]]] = []

    def run(self) -> None:
        assert isinstance(self.kd.node, ast.FunctionDef)
        for stmt in self.kd.node.body:
            self.stmt(stmt)
        self.kd.calls = self.calls

    # -- helpers --------------------------------------------------------------------------
    def _param_of(self, node: ast.expr) -> str | None:
        """``x`` -> "x" for an array parameter; ``s.f`` -> "s.f" for a field of a struct parameter."""
        if isinstance(node, ast.Name) and node.id in self.kd.params:
            return node.id
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in self.kd.params
            and not self.kd.params[node.value.id].is_array
        ):
            key = f"{node.value.id}.{node.attr}"
            if key not in self.kd.params:
                self.kd.params[key] = ParamFacts(key, "", is_array=True, is_struct=True)
            return key
        return None

    def _record(self, param: str, kind: AccessKind, node: ast.AST, index: str, via: str | None = None) -> None:
        self.kd.params[param].accesses.append(Access(kind, self.src.span(node), index, tuple(self.loops), via))

    def _subscript_base(self, node: ast.expr) -> tuple[str, str] | None:
        """For ``x[i]``, ``x[i][0]``, ``x[i].pos``: (param, index text of the first subscript)."""
        while True:
            if isinstance(node, ast.Subscript):
                param = self._param_of(node.value)
                if param is not None:
                    return param, _unparse(node.slice)
                node = node.value
            elif isinstance(node, ast.Attribute):
                node = node.value
            else:
                return None

    # -- statements -----------------------------------------------------------------------
    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Assign):
            self.expr(s.value)
            for t in s.targets:
                self.store(t, s)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.expr(s.value)
                self.store(s.target, s)
        elif isinstance(s, ast.AugAssign):
            base = self._subscript_base(s.target)
            self.expr(s.value)
            if base is not None:
                param, index = base
                kind: AccessKind = "accum" if isinstance(s.op, (ast.Add, ast.Sub)) else "inplace_mul"
                self._record(param, kind, s, index)
                self.read_indices.setdefault(param, set()).add(index)
            else:
                self.expr(s.target)
        elif isinstance(s, ast.For):
            self.expr(s.iter)
            self.loops.append(self.loop_kind(s.iter))
            for b in s.body:
                self.stmt(b)
            self.loops.pop()
            for b in s.orelse:
                self.stmt(b)
        elif isinstance(s, ast.While):
            self.expr(s.test)
            self.loops.append("dynamic")
            for b in s.body:
                self.stmt(b)
            self.loops.pop()
        elif isinstance(s, ast.If):
            self.expr(s.test)
            for b in s.body:
                self.stmt(b)
            for b in s.orelse:
                self.stmt(b)
        elif isinstance(s, (ast.Return, ast.Expr)):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.With):
            for b in s.body:
                self.stmt(b)
        else:
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.stmt):
                    self.stmt(child)
                elif isinstance(child, ast.expr):
                    self.expr(child)

    def store(self, target: ast.expr, stmt: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.store(elt, stmt)
            return
        base = self._subscript_base(target)
        if base is None:
            # component stores on locals (v[0] = ...) read their index expressions
            if isinstance(target, ast.Subscript):
                self.expr(target.slice)
            return
        param, index = base
        reads_same = index in self.read_indices.get(param, set())
        self._record(param, "rmw" if reads_same else "write", stmt, index)
        if isinstance(target, ast.Subscript):
            self.expr(target.slice)

    def loop_kind(self, it: ast.expr) -> LoopKind:
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            if all(self.is_static(a) for a in it.args):
                return "static"
            return "dynamic"
        if isinstance(it, ast.Call) and self.src.is_warp(it.func, "static"):
            return "static"
        return "dynamic"

    def is_static(self, a: ast.expr) -> bool:
        if isinstance(a, ast.Constant) and isinstance(a.value, int):
            return True
        if isinstance(a, ast.Call) and self.src.is_warp(a.func, "static"):
            return True
        if isinstance(a, ast.Name) and a.id in self.consts:
            return True
        if isinstance(a, ast.UnaryOp):
            return self.is_static(a.operand)
        if isinstance(a, ast.BinOp):
            return self.is_static(a.left) and self.is_static(a.right)
        return False

    # -- expressions ----------------------------------------------------------------------
    def expr(self, e: ast.expr) -> None:
        cls = e.__class__
        if cls is ast.Name or cls is ast.Constant:
            return  # a leaf: nothing is accessed (a parameter is only accessed by an index)
        if isinstance(e, ast.Subscript):
            param = self._param_of(e.value)
            if param is not None:
                index = _unparse(e.slice)
                self._record(param, "read", e, index)
                self.read_indices.setdefault(param, set()).add(index)
                self.expr(e.slice)
                return
        if isinstance(e, ast.Call):
            name = self.src.warp_name(e.func)
            short = name.rpartition(".")[2] if name is not None else None
            if short in _ATOMICS and e.args:
                param = self._param_of(e.args[0])
                if param is not None:
                    index = ", ".join(_unparse(a) for a in e.args[1:-1])
                    kind: AccessKind = "atomic" if short in ("atomic_add", "atomic_sub") else "rmw"
                    self._record(param, kind, e, index)
                    for a in e.args[1:]:
                        self.expr(a)
                    return
            if short in _TILE_ACCESS and e.args:
                param = self._param_of(e.args[0])
                if param is not None:
                    self._record(param, _TILE_ACCESS[short], e, "tile")
                    for a in e.args[1:]:
                        self.expr(a)
                    for k in e.keywords:
                        self.expr(k.value)
                    return
            if name is None and isinstance(e.func, (ast.Name, ast.Attribute)):
                callee = e.func.id if isinstance(e.func, ast.Name) else e.func.attr
                args = [a.id if isinstance(a, ast.Name) else None for a in e.args]
                self.calls.append((callee, args, tuple(self.loops)))
        for name in e._fields:  # ``ast.iter_child_nodes``, without its two generators per node
            value = getattr(e, name, None)
            for child in value if value.__class__ is list else (value,):
                if isinstance(child, ast.expr):
                    self.expr(child)
                elif isinstance(child, ast.keyword):
                    self.expr(child.value)
                elif isinstance(child, ast.comprehension):
                    self.expr(child.iter)


def _module_int_constants(src: SourceFile) -> set[str]:
    """Module-level names bound to int literals or ``wp.constant(...)``: static loop bounds."""
    out: set[str] = set()
    for stmt in src.tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            value = stmt.value
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if value is None:
                continue
            ok = (isinstance(value, ast.Constant) and isinstance(value.value, int)) or (
                isinstance(value, ast.Call) and src.is_warp(value.func, "constant")
            )
            if ok:
                out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def fold_func_calls(kernels: list[KernelDef]) -> None:
    """Fold the accesses a ``@wp.func`` makes to its array parameters into every caller that
    passes one of its own parameters in that position (to a fixpoint, depth-bounded)."""
    funcs: dict[str, list[KernelDef]] = {}
    for k in kernels:
        if k.kind == "func":
            funcs.setdefault(k.name, []).append(k)
    for _ in range(4):
        changed = False
        for k in kernels:
            for callee_name, args, loops in k.calls:
                for callee in funcs.get(callee_name, []):
                    if callee is k:
                        continue
                    names = list(callee.positional)
                    for pos, arg in enumerate(args[: len(names)]):
                        if arg is None or arg not in k.params:
                            continue
                        src_params = callee.params[names[pos]]
                        dst = k.params[arg]
                        for acc in src_params.accesses:
                            new = Access(acc.kind, acc.span, acc.index, loops + acc.loops, callee_name)
                            if new not in dst.accesses:
                                dst.accesses.append(new)
                                changed = True
        if not changed:
            break
