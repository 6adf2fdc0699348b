"""Slabs of one array that launches touch apart: a kernel that reaches array parameter ``u`` only as
``u[s, i, j]``, ``s`` one of its int parameters (a history kept in one ``wp.array3d``, step ``s`` its first
index), touches only slab ``s``; launches that pass different known ints for ``s`` touch different memory.

The overwrite analysis (:mod:`warpfix.model.hazards`) keys the reads it remembers by slab, so writing slab
``t + 1`` after reading slab ``t`` is no overwrite.
"""

from __future__ import annotations

import ast

from warpfix.model.facts import Event, KernelDef, ParamFacts
from warpfix.model.memo import IdentityMemo


def touched_slab(ev: Event, param: str | None) -> int | None:
    """The slab of the array bound to ``param`` that launch ``ev`` touches: the int it passes for the kernel's
    slab index of that parameter, when known; None (the whole array) otherwise."""
    if param is None or ev.kind != "launch" or ev.kernel is None:
        return None
    index_param = slab_index(ev.kernel, param)
    if index_param is None:
        return None
    ints = ev.detail.get("ints")
    value = ints.get(index_param) if isinstance(ints, dict) else None
    return value if type(value) is int else None


def slab_index(kd: KernelDef, param: str) -> str | None:
    """The int parameter of kernel ``kd`` that is the first index of every access of array ``param`` (none
    through a ``@wp.func``, none of the whole array), and that the kernel never assigns; else None."""
    return _slab_indexes(kd).get(param)


def _kernel_slab_indexes(kd: KernelDef) -> dict[str, str]:
    assigned = _assigned_names(kd) if any(f.is_array and f.accesses for f in kd.params.values()) else frozenset()
    out = {}
    for name, facts in kd.params.items():
        if facts.is_array and facts.accesses:
            found = _slab_of(kd, facts, assigned)
            if found is not None:
                out[name] = found
    return out


_slab_indexes: IdentityMemo[KernelDef, dict[str, str]] = IdentityMemo(_kernel_slab_indexes, 20_000)


def _slab_of(kd: KernelDef, facts: ParamFacts, assigned: frozenset[str]) -> str | None:
    found: str | None = None
    for access in facts.accesses:
        if access.via is not None:
            return None
        first = _first_index(access.index)
        if first is None or (found is not None and first != found):
            return None
        found = first
    other = kd.params.get(found) if found is not None else None
    if other is None or other.is_array or found in assigned:
        return None
    return found


def _first_index(index: str) -> str | None:
    """``s`` of the index text ``(s, i, j)``; None when the index has one component or its first is no name."""
    try:
        node = ast.parse(index, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Tuple) and len(node.elts) > 1 and isinstance(node.elts[0], ast.Name):
        return node.elts[0].id
    return None


def _assigned_names(kd: KernelDef) -> frozenset[str]:
    """Names the kernel's body assigns (a parameter rebound inside names no fixed slab)."""
    node = kd.node
    if node is None:
        return frozenset()
    out = set()
    for sub in ast.walk(node):
        targets: list[ast.expr] = []
        if isinstance(sub, ast.Assign):
            targets = list(sub.targets)
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)):
            targets = [sub.target]
        elif isinstance(sub, (ast.For, ast.comprehension)):
            targets = [sub.target]
        while targets:
            t = targets.pop()
            if isinstance(t, ast.Name):
                out.add(t.id)
            elif isinstance(t, (ast.Tuple, ast.List)):
                targets.extend(t.elts)
            elif isinstance(t, ast.Starred):
                targets.append(t.value)
    return frozenset(out)
