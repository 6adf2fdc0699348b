"""The ``ast`` shapes the rebinding codemods look for, read the way they read them (for
:mod:`warpfix.model.rebind_fix`): copies, resets and two-buffer swaps, a launch's outputs and inputs,
a kernel's stores, assignment targets; nodes in source order."""

from __future__ import annotations

import ast
from collections.abc import Iterator

_PLACES = (ast.Name, ast.Attribute, ast.Subscript)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and its descendants in source order (libcst's visiting order, not ``ast.walk``'s)."""
    todo = [node]
    while todo:
        cur = todo.pop()
        yield cur
        todo.extend(reversed(list(ast.iter_child_nodes(cur))))


def _ordered(nodes: list) -> list:
    """``nodes`` in source order, an enclosing node before the nodes it holds."""
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset, -(n.end_lineno or 0), -(n.end_col_offset or 0)))


def _name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _positional(call: ast.Call) -> list[ast.expr]:
    return [a for a in call.args if not isinstance(a, ast.Starred)]


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _listed(call: ast.Call, slot: str, index: int) -> list[ast.expr]:
    value = _keyword(call, slot)
    if value is None:
        args = _positional(call)
        value = args[index] if len(args) > index else None
    return list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else []


def _copy_operands(call: ast.Call) -> tuple[ast.expr, ast.expr] | None:
    """(dst, src) of ``wp.copy(dst, src)`` / ``dst.assign(src)`` (codemods/wf101_copy_rebind.py)."""
    name, args = _name(call.func), _positional(call)
    if name == "copy":
        named = {k.arg: k.value for k in call.keywords if k.arg}
        if len(args) == 2 and not named:
            return args[0], args[1]
        if set(named) == {"dest", "src"} and not args:
            return named["dest"], named["src"]
        return None
    if name == "assign" and isinstance(call.func, ast.Attribute) and len(call.args) + len(call.keywords) == 1:
        if len(args) == 1:
            return call.func.value, args[0]
        if call.keywords and call.keywords[0].arg in ("src", "value"):
            return call.func.value, call.keywords[0].value
    return None


def _is_reset(call: ast.Call) -> bool:
    name, count = _name(call.func), len(call.args) + len(call.keywords)
    return isinstance(call.func, ast.Attribute) and (name == "zero_" and not count or name == "fill_" and count == 1)


def _swap_places(node: ast.Assign) -> list[ast.expr] | None:
    """The two places of ``a, b = b, a`` (codemods/wf104_fresh_output.py)."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Tuple) or not isinstance(node.value, ast.Tuple):
        return None
    left, right = node.targets[0].elts, node.value.elts
    if len(left) != 2 or len(right) != 2 or not all(isinstance(p, _PLACES) for p in left):
        return None
    same = [ast.unparse(a) == ast.unparse(b) for a, b in ((left[0], right[1]), (left[1], right[0]))]
    return list(left) if all(same) else None


def _writes(call: ast.Call) -> tuple[list[ast.expr], list[ast.expr]]:
    """(outputs, inputs) of a launch, ([dest], []) of a copy, else ([], [])."""
    name = _name(call.func)
    if name == "launch":
        return _listed(call, "outputs", 3), _listed(call, "inputs", 2)
    if name == "copy" and _positional(call):
        return [_positional(call)[0]], []
    return [], []


def _store_target(node: ast.stmt) -> ast.Subscript | None:
    target = node.target if isinstance(node, ast.AugAssign) else (
        node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
    return target if isinstance(target, ast.Subscript) else None


def _place(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _is_kernel(fn: ast.AST) -> bool:
    return isinstance(fn, _FUNCS) and any(
        (_name(d.func if isinstance(d, ast.Call) else d) or "") == "kernel" for d in fn.decorator_list)


def _target_names(target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(e) for e in target.elts))
    return set()
