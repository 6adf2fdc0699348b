"""The slab of an array argument a launch touches, as the probe's mirror of Warp's overwrite tracker sees it.

A kernel that reaches array argument ``u`` only as ``u[s, i, j]``, ``s`` one of its int arguments it never
assigns (a history kept in one ``wp.array3d``, step ``s`` its first index), touches only slab ``s``: a launch
writing slab ``t + 1`` after one read slab ``t`` overwrites nothing that read (the static model's
:mod:`warpfix.model.slabs`, here on the kernel's own syntax tree). Part of the probe package: no imports
beyond the standard library.
"""

from __future__ import annotations

import ast
from typing import Any


def kernel_slabs(kernel: Any) -> dict[str, str]:
    """Array argument -> the int argument that is the first index of every one of its uses, for each such
    argument of ``kernel`` (an array passed on whole, to a function or elsewhere, has none)."""
    tree = getattr(getattr(kernel, "adj", None), "tree", None)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None) if tree is not None else None
    if fn is None:
        return {}
    arrays = {a.arg for a in fn.args.args if a.annotation is not None and "array" in ast.unparse(a.annotation)}
    ints = {a.arg for a in fn.args.args if a.arg not in arrays}
    assigned = {t.id for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For))
                for t in ast.walk(n.target if not isinstance(n, ast.Assign) else ast.Tuple(n.targets))
                if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
    parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
    found: dict[str, str | None] = {}
    for node in ast.walk(fn):
        if not isinstance(node, ast.Name) or node.id not in arrays or isinstance(parents.get(id(node)), ast.arg):
            continue
        holder = parents.get(id(node))
        if isinstance(holder, ast.Attribute):
            continue  # ``u.shape``: no element
        first = None
        if isinstance(holder, ast.Subscript) and holder.value is node:
            index = holder.slice
            if isinstance(index, ast.Tuple) and len(index.elts) > 1 and isinstance(index.elts[0], ast.Name):
                first = index.elts[0].id
        if first is None or first not in ints or first in assigned or found.get(node.id, first) != first:
            found[node.id] = None
        else:
            found[node.id] = first
    return {name: s for name, s in found.items() if s is not None}


def slab_of(slabs: dict[str, str], values: dict[str, Any], label: str) -> int | None:
    """The slab of argument ``label`` this launch touches (``values``: the launch's arguments by name)."""
    index = slabs.get(label)
    value = values.get(index) if index is not None else None
    return value if type(value) is int else None


def read_and_overwritten_apart(op: Any, info: Any) -> bool:
    """Whether ``op`` reads ``info`` through one argument and writes it through another (not one argument the
    kernel updates in place, whose adjoint may need no old value: that is the static rule's to judge)."""
    uses = op.positions.get(info.order, [])
    written = {pos for pos, _, w in uses if w and pos is not None}
    slabs = {op.slabs.get(pos) for pos in written}  # a slab written apart from every slab read: nothing read
    return bool(written) and any(r and not w and pos is not None and pos not in written
                                 and (None in slabs or op.slabs.get(pos) is None or op.slabs[pos] in slabs)
                                 for pos, r, w in uses)
