"""What reads a gradient: one notion of "this expression reads ``x.grad``" for the model and the codemods.

Warp hands out an array's gradient three ways, and each reads the same buffer:

* ``x.grad`` -- the attribute;
* ``tape.gradients[x]`` -- the tape's map from array to gradient (``example_diffray``: the
  gradient of ``self.render_mesh.rot``, an array held by a struct);
* ``tape.gradients.get(x)`` -- the same map, read with a default.

:func:`grad_owner` answers for Python's :mod:`ast` (the model), :func:`cst_grad_owner` for libcst (the
codemods): the expression whose gradient is read, or None. :func:`cst_reads_grad` says whether a
statement reads any gradient, directly or through a local bound from one (``g = tape.gradients[x]``
then ``opt.step([g])``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # libcst is imported by the codemods' functions only: `check` does not load it
    import libcst as cst


def _is_gradients(e: ast.expr) -> bool:
    return isinstance(e, ast.Attribute) and e.attr == "gradients"


def grad_owner(e: ast.AST) -> ast.expr | None:
    """``x`` when ``e`` is ``x.grad``, ``<tape>.gradients[x]`` or ``<tape>.gradients.get(x, ...)``."""
    if isinstance(e, ast.Attribute) and e.attr == "grad":
        return e.value
    if isinstance(e, ast.Subscript) and _is_gradients(e.value) and not isinstance(e.slice, (ast.Slice, ast.Tuple)):
        return e.slice
    if (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "get"
            and _is_gradients(e.func.value) and e.args and not isinstance(e.args[0], ast.Starred)):
        return e.args[0]
    return None


def reads_grad(e: ast.AST, names: Iterable[str] = ()) -> bool:
    """Whether ``e`` reads a gradient, or one of the local ``names`` bound from one."""
    names = set(names)
    return any(grad_owner(n) is not None or (isinstance(n, ast.Name) and n.id in names) for n in ast.walk(e))


def _cst_is_gradients(e: cst.BaseExpression) -> bool:
    import libcst as cst  # noqa: PLC0415

    return isinstance(e, cst.Attribute) and e.attr.value == "gradients"


def cst_grad_owner(node: cst.CSTNode) -> cst.BaseExpression | None:
    """libcst's :func:`grad_owner`."""
    import libcst as cst  # noqa: PLC0415

    if isinstance(node, cst.Attribute) and node.attr.value == "grad":
        return node.value
    if isinstance(node, cst.Subscript) and _cst_is_gradients(node.value) and len(node.slice) == 1:
        index = node.slice[0].slice
        return index.value if isinstance(index, cst.Index) else None
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get"
            and _cst_is_gradients(node.func.value) and node.args and not node.args[0].star):
        return node.args[0].value
    return None


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    import libcst as cst  # noqa: PLC0415

    nodes: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nodes.append(node)
            return True

    node.visit(Collect())
    return nodes


def cst_reads_grad(node: cst.CSTNode, names: Iterable[str] = ()) -> bool:
    """Whether ``node`` reads a gradient, or one of the local ``names`` bound from one."""
    import libcst as cst  # noqa: PLC0415

    names = set(names)
    return any(cst_grad_owner(n) is not None or (isinstance(n, cst.Name) and n.value in names) for n in _walk(node))


def cst_grad_locals(stmts: Iterable[cst.BaseStatement]) -> set[str]:
    """Local names that ``stmts`` bind (``g = ...``) to a value read from a gradient, followed through
    chains (``g = tape.gradients[x]``; ``h = g.flatten()``)."""
    import libcst as cst  # noqa: PLC0415

    assigns = [s for stmt in stmts for s in _walk(stmt) if isinstance(s, (cst.Assign, cst.AnnAssign))]
    names: set[str] = set()
    for _ in range(3):
        for a in assigns:
            if a.value is None or not cst_reads_grad(a.value, names):
                continue
            targets = [t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]
            names |= {t.value for t in targets if isinstance(t, cst.Name)}
    return names
