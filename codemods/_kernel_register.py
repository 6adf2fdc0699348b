"""WF106 / WF107 when the kernel writes the element more than once: keep it in a local, store it once.

A kernel that computes an element in several steps through its own array argument reads back values it
stored, and overwrites them after the read::

    nxt.v[i] = p.v[i]                                   v_local = p.v[i]
    if w > 0.0:                                         if w > 0.0:
        nxt.v[i] = p.v[i] + dt * a                 ->       v_local = p.v[i] + dt * a
        nxt.v[i] = nxt.v[i] / (1.0 + c * wp.length(nxt.v[i]))   v_local = v_local / (1.0 + c * wp.length(v_local))
    nxt.x[i] = p.x[i] + dt * nxt.v[i]                   nxt.x[i] = p.x[i] + dt * v_local
                                                        nxt.v[i] = v_local

Warp's backward replays the reads but not the stores, so the adjoint of the division reads the final ``nxt.v[i]``.
In a local every step keeps its own value, and the one store at the end writes what the last step computed: the
same values in the same order, so the forward is bit for bit the same, and no launch changes.

Only when that is mechanical: the first access of the element is an unconditional store at the kernel's top level
(the kernel never reads what the array held before), every access uses the same index, whose names the kernel
binds once before it, none is in a loop or stores a component, no store is a bare literal (its type would be the
literal's, not the array's), and the kernel has no ``return`` that would skip the final store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from codemods._cst import target_names

if TYPE_CHECKING:
    from codemods.wf401_kernel_output import KernelOutput


def _literal(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.UnaryOperation):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Float))


def register_refusal(
    cmd: KernelOutput, body: cst.IndentedBlock, place: str, stores: list[cst.CSTNode], accesses: list[cst.Subscript]
) -> str | None:
    """Why the element of ``place`` cannot live in a local (see the module), or None when it can."""
    from codemods.wf401_kernel_output import _store_target  # the store shapes of the rule's main codemod

    if not accesses or not stores:
        return f"{place} is not stored"
    index = cmd.code(accesses[0].slice[0]) if len(accesses[0].slice) == 1 else None
    if index is None or any(len(a.slice) != 1 or cmd.code(a.slice[0]) != index for a in accesses):
        return f"the accesses of {place} use different indices"
    first = _store_target(stores[0])
    line = cmd.parent(stores[0])
    if (first is not accesses[0] or not isinstance(stores[0], cst.Assign) or cmd.parent(line) is not body
            or any(a in accesses for a in cmd.nodes(stores[0].value, cst.Subscript))):
        return f"{place} is read before the kernel first stores it, or first stored under an if or a loop"
    if any(cmd.enclosing(a, cst.For) or cmd.enclosing(a, cst.While) for a in accesses):
        return f"{place} is used in a loop"
    if cmd.nodes(body, cst.Return):
        return "the kernel returns early: a store at its end might not run"
    for a in accesses:
        holder = cmd.parent(a)
        if isinstance(holder, cst.Subscript) and holder.value is a and any(
                _store_target(s) is holder for s in cmd.nodes(body, (cst.Assign, cst.AugAssign))):
            return f"a component of {place} is stored"
    if any(_literal(s.value) for s in stores):
        return f"a store of {place} is a bare literal"
    names = {n.value for n in cmd.nodes(accesses[0].slice[0], cst.Name)}
    bound = [t for t in cmd.nodes(body, cst.AssignTarget) if set(target_names(t.target)) & names]
    if len(bound) > 1 or any(cmd.pos(t).start.line >= cmd.pos(stores[0]).start.line for t in bound):
        return f"the index of {place} is assigned more than once or after the first store"
    return None


def keep_in_register(
    cmd: KernelOutput, func: cst.FunctionDef, body: cst.IndentedBlock, place: str, stores: list[cst.CSTNode],
    accesses: list[cst.Subscript],
) -> str:
    """Rewrite the kernel (see the module; :func:`register_refusal` must have said None); the summary."""
    from codemods.wf401_kernel_output import _store_target

    local = cmd.fresh_name(f"{place.rpartition('.')[2]}_local", func)
    targets = {id(_store_target(s)) for s in stores}
    for a in accesses:
        cmd.replace(a, cst.Name(local))  # a store's target becomes the local; a read reads it
    last: cst.CSTNode = accesses[-1]
    while cmd.parent(last) is not body:
        last = cmd.parent(last)
    index = cmd.code(accesses[0].slice[0])
    store = f"{place}[{index}] = {local}\n"
    cmd.insert_after(last, [cmd.statement(store)])  # type: ignore[arg-type]
    reads = len(accesses) - len(targets)
    return (f"kept in a local: the {len(stores)} stores and {reads} reads of `{place}[{index}]` use `{local}`, "
            f"stored once after line {cmd.pos(last).end.line} (the same values; no launch changes)")
