"""Questions about host syntax the interpreter asks (no values involved), and the Warp API names it models."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpfix.model.source import SourceFile

_ALLOC = {"zeros", "empty", "ones", "full", "array", "from_numpy", "from_torch", "from_jax", "from_dlpack"}
_ALLOC_LIKE = {"zeros_like", "empty_like", "ones_like", "full_like"}
# Python builtins that neither read an array's values nor write one (when the name is not rebound)
_PURE_BUILTINS = frozenset({"len", "range", "isinstance", "issubclass", "str", "repr", "type", "id",
                            "hash", "hasattr", "getattr", "callable", "enumerate", "zip", "iter"})
_LAUNCH = {"launch", "launch_tiled"}
_WARP_LIBRARIES = {"fem", "optim"}  # warp's own Python-level libraries, summarised like any package


def _passes(n: int, run: int) -> list[int]:
    """The iterations a loop of ``n`` known trips runs: all of up to ``run + 1``, else the first ``run``
    and the last (so the last element of a state chain is written); one when not unrolling (``run`` 1)."""
    if run <= 1:
        return [0] if n > 0 else []
    return list(range(n)) if n <= run + 1 else [*range(run), n - 1]


def _is_place(node: ast.expr) -> bool:
    """An int literal, a name or an attribute chain on a name (evaluating it runs nothing)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int)
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _keyword_holds(e: ast.Call, when: str, n_positional: int, params: list[str]) -> bool:
    """An :class:`Op` condition at this call: ``"add"`` holds when ``add`` is passed a value other than
    a false literal (``False``, ``None``, ``0``), ``"!add"`` when it is not."""
    negate, name = when.startswith("!"), when.lstrip("!")
    node = next((k.value for k in e.keywords if k.arg == name), None)
    if node is None and name in params and params.index(name) < n_positional:
        node = e.args[params.index(name)]
    passed = node is not None and not (isinstance(node, ast.Constant) and not node.value)
    return passed != negate


def _is_contextmanager(src: SourceFile, fn: ast.FunctionDef) -> bool:
    """``fn`` is decorated with contextlib's ``contextmanager``, by the file's imports."""
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Name):
            if any(isinstance(n, ast.ImportFrom) and n.module == "contextlib"
                   and any(a.name == "contextmanager" and (a.asname or a.name) == dec.id for a in n.names)
                   for n in src.nodes_of(ast.ImportFrom)):
                return True
        elif isinstance(dec, ast.Attribute) and dec.attr == "contextmanager" and isinstance(dec.value, ast.Name):
            if any(a.name == "contextlib" and (a.asname or a.name) == dec.value.id
                   for n in src.nodes_of(ast.Import) for a in n.names):
                return True
    return False


def _is_name_chain(node: ast.expr) -> bool:
    """``x`` or ``x.a.b``: evaluating it calls nothing (short of a property)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _is_enumerate(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "enumerate"
            and bool(node.args))


def _is_super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _asks_for_grad(e: ast.Call) -> bool:
    """``requires_grad=True`` given literally."""
    return any(k.arg == "requires_grad" and _truthy(k.value) for k in e.keywords)


def _find_method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    """The first method ``name`` in the class body. The table of a class's methods is built once
    and kept on its node (library classes such as newton's ``ModelBuilder`` have hundreds, and
    are asked about at every call)."""
    table = cls.__dict__.get("_warpfix_methods")
    if table is None:
        table = {}
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef):
                table.setdefault(stmt.name, stmt)
        cls._warpfix_methods = table  # type: ignore[attr-defined]
    return table.get(name)


def _is_property(fn: ast.FunctionDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id in ("property", "cached_property"))
        or (isinstance(d, ast.Attribute) and d.attr == "cached_property")
        for d in fn.decorator_list
    )


def _decorated(fn: ast.FunctionDef, name: str) -> bool:
    """``@staticmethod`` / ``@classmethod`` (by the builtin's name)."""
    return any(isinstance(d, ast.Name) and d.id == name for d in fn.decorator_list)


def _is_static(fn: ast.FunctionDef) -> bool:
    return _decorated(fn, "staticmethod") or _decorated(fn, "classmethod")


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _truthy(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and bool(node.value)


_TEXT: dict[int, tuple[ast.AST, str]] = {}


def _text(node: ast.AST) -> str:
    """``ast.unparse`` with a cache per node (names are asked for many times per site)."""
    hit = _TEXT.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    if isinstance(node, ast.Name):
        text = node.id
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        text = f"{node.value.id}.{node.attr}"
    else:
        text = ast.unparse(node)
    if len(_TEXT) > 200_000:
        _TEXT.clear()
    _TEXT[id(node)] = (node, text)
    return text


def _callee_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"{_callee_name(func.value)}.{func.attr}"
    return type(func).__name__


def _label_of(e: ast.Call) -> str:
    return _text(e)[:60]


def _binop(op: ast.operator, a: object, b: object) -> int | None:
    if not (isinstance(a, int) and isinstance(b, int)):
        return None
    try:
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.FloorDiv):
            return a // b
        if isinstance(op, ast.Mod):
            return a % b
    except ZeroDivisionError:
        return None
    return None


def iter_roots(src: SourceFile) -> Iterator[tuple[ast.FunctionDef | ast.ClassDef, list[ast.FunctionDef]]]:
    """Top-level functions, and top-level classes with their methods: candidate roots."""
    for stmt in src.tree.body:
        if isinstance(stmt, ast.FunctionDef):
            yield stmt, []
        elif isinstance(stmt, ast.ClassDef):
            yield stmt, [sub for sub in stmt.body if isinstance(sub, ast.FunctionDef) and sub.name != "__init__"]
