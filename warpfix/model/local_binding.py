"""Where a function bound a local name, read from the ``ast`` (WF104's report and fix marker)."""

from __future__ import annotations

import ast

from warpfix.model.source import SourceFile

__all__ = ["last_binding"]


def _binds(stmt: ast.Assign, name: str) -> ast.expr | None:
    """The value ``stmt`` binds to the plain name ``name`` (``x = v``, ``a, x = u, v``), else None."""
    if len(stmt.targets) != 1:
        return None
    target, value = stmt.targets[0], stmt.value
    if isinstance(target, ast.Name):
        return value if target.id == name else None
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        return next((v for t, v in zip(target.elts, value.elts, strict=True)
                     if isinstance(t, ast.Name) and t.id == name), None)
    return None


def _scope_statements(scope: ast.AST) -> list[ast.Assign]:
    """The assignments of ``scope`` itself: nested functions and classes are scopes of their own."""
    out, todo = [], list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign):
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def last_binding(src: SourceFile, line: int, name: str) -> tuple[ast.Assign, ast.expr] | None:
    """(statement, value) of the last assignment to the local ``name`` that starts at or before ``line`` in
    the innermost function around ``line``, or the module's own code (``x_next = self.x[(t + 1) % 2]``);
    None when there is none (a parameter, a global, a name bound by a ``for`` or a ``with``)."""
    funcs = [f for f in src.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef)
             if f.lineno <= line <= (f.end_lineno or f.lineno)]
    scope: ast.AST = max(funcs, key=lambda f: f.lineno) if funcs else src.tree
    found: tuple[ast.Assign, ast.expr] | None = None
    for stmt in _scope_statements(scope):
        value = _binds(stmt, name) if stmt.lineno <= line else None
        if value is not None and (found is None or stmt.lineno >= found[0].lineno):
            found = (stmt, value)
    return found
