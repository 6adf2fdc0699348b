"""WF403's fallback when the bound cannot be made static: the kernel's dynamic loop becomes a ``@wp.func``.

Backward does not replay a dynamic loop before the code after it, so the adjoint of a non-linear use
after the loop (``color = lambert * color``) reads the carried value as it was before the loop. A
function boundary fixes that: the kernel keeps the use, now of the value the call returned, and the
function's own adjoint replays its loop. This is RULES.md's "return the raw accumulator and move the
post-processing to the caller", applied to a loop written inline in a kernel::

    lambert = float(0.0)                        @wp.func
    for i in range(lights.num_lights):          def _draw_loop(lights: Any, normal: Any, lambert: Any):
        val = wp.dot(normal, lights.dirs[i])        for i in range(lights.num_lights):
        lambert = lambert + val           ->            val = wp.dot(normal, lights.dirs[i])
    color = lambert * color                             lambert = lambert + val
                                                    return lambert
                                                ...
                                                lambert = _draw_loop(lights, normal, lambert)

The function runs the same statements in the same order on the same values (its parameters are
generic, ``typing.Any``, so Warp compiles it for the kernel's own types): forward values are
unchanged. The function's parameters are the values the loop reads or updates that the kernel
defined before it; it returns those the loop updates and the kernel reads after it.

Only where that is all the loop needs: every value it carries from one iteration to the next is a
sum (``s = s + e``, ``s += e``, ``s -= e``, with ``e`` reading no carried value), since the function's
backward re-runs the iterations without restoring the carried values as well; no ``return``,
``break``, ``continue``, nested definition or ``wp.tid()`` in the loop; no local vector updated in
place; nothing first assigned in the loop (its variable included) and read after it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst
from libcst.codemod.visitors import AddImportsVisitor

if TYPE_CHECKING:
    from codemods.wf403_static_bound import StaticLoopBound


class NotExtractable(Exception):
    """Why the loop cannot become a function (the reason is the message)."""


def loop_into_func(cmd: StaticLoopBound, kernel: cst.FunctionDef, loop: cst.For) -> str:
    """Register the edits that move ``loop`` of ``kernel`` into a new ``@wp.func``; the report's summary.
    Raises :class:`NotExtractable` with the reason when the loop's shape does not allow it."""
    if not isinstance(cmd.parent(kernel), cst.Module):
        raise NotExtractable("the kernel is defined inside a function or class: its loop may read names of that "
                             "scope, which a module-level function would not see")
    tree = ast.parse(cmd.tree.code)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.lineno == cmd.pos(kernel.name).start.line), None)  # fmt: skip
    at = cmd.pos(loop).start.line
    node = next((n for n in ast.walk(fn) if isinstance(n, ast.For) and n.lineno == at), None) if fn else None
    if fn is None or node is None:
        raise NotExtractable("the loop was not found in the kernel's syntax tree")
    inputs, outputs = _signature(fn, node)
    if any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(tree)) and not _imports_any(tree):
        raise NotExtractable("the module binds `Any` to something else than typing.Any")
    alias = cmd.warp_alias()
    name = cmd.fresh_name(f"_{kernel.name.value}_loop")
    params = cst.Parameters([cst.Param(cst.Name(p), cst.Annotation(cst.Name("Any"))) for p in inputs])
    returned = ", ".join(outputs)
    func = cst.FunctionDef(
        name=cst.Name(name),
        params=params,
        body=cst.IndentedBlock([loop.with_changes(leading_lines=[]), cmd.statement(f"return {returned}\n")]),
        decorators=[cst.Decorator(cmd.expression(f"{alias}.func"))],
    )
    call = cmd.statement(f"{returned} = {name}({', '.join(inputs)})\n")
    cmd.replace(loop, call.with_changes(leading_lines=loop.leading_lines))
    cmd.insert_definitions(kernel, [func])
    AddImportsVisitor.add_needed_import(cmd.context, "typing", "Any")
    return (f"loop into a @{alias}.func: the loop at line {at} is now {name}(), which returns {returned}; the "
            "kernel's code after it uses the returned value, whose adjoint the function's backward computes")


def _signature(fn: ast.FunctionDef, loop: ast.For) -> tuple[list[str], list[str]]:
    """(the function's parameters, the values it returns), in the order the loop first mentions them."""
    for n in ast.walk(loop):
        if isinstance(n, (ast.Return, ast.Break, ast.Continue)):
            raise NotExtractable(f"the loop holds `{type(n).__name__.lower()}`")
        if isinstance(n, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            raise NotExtractable("the loop holds a nested definition")
    params = {a.arg for a in fn.args.args}
    end = loop.end_lineno or loop.lineno
    before = params | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                       and n.lineno < loop.lineno}  # fmt: skip
    after = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.lineno > end}
    targets = _names(loop.target)
    if shadowed := sorted(targets & after):
        raise NotExtractable(f"the loop variable `{shadowed[0]}` is read after the loop")
    if any(isinstance(n, ast.Attribute) and n.attr == "tid" for n in ast.walk(loop)):
        raise NotExtractable("the loop calls `tid()`, which only a kernel may")
    first: dict[str, tuple[int, int]] = {}  # name -> where the loop first mentions it
    stored: set[str] = set()
    for n in ast.walk(loop):
        if isinstance(n, ast.Name) and n.id not in targets:
            first[n.id] = min(first.get(n.id, (n.lineno, n.col_offset)), (n.lineno, n.col_offset))
            if isinstance(n.ctx, ast.Store):
                stored.add(n.id)
        elif isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, ast.Store):
            base = _base_name(n)
            if base is None or base not in params or isinstance(n, ast.Attribute):
                raise NotExtractable(f"the loop updates `{ast.unparse(n)}` in place")
    mentioned = sorted(first, key=first.__getitem__)
    if first := sorted(stored - before & after):
        raise NotExtractable(f"`{first[0]}` is first assigned in the loop and read after it")
    carried = stored & before
    for stmt in ast.walk(loop):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and stmt is not loop:
            for target in _assigned(stmt) & carried:
                if not _additive(stmt, target, carried):
                    raise NotExtractable(f"`{target}` is carried across iterations by `{ast.unparse(stmt)}`, not "
                                         "summed: the function's own backward would read it wrongly as well")
    for inner in ast.walk(loop):
        if isinstance(inner, ast.For) and inner is not loop and _names(inner.target) & carried:
            raise NotExtractable("an inner loop's variable is a value the loop carries")
    outputs = [v for v in mentioned if v in carried and v in after]
    if not outputs:
        raise NotExtractable("the code after the loop reads no value the loop computes")
    return [v for v in mentioned if v in before], outputs


def _names(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _base_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _assigned(stmt: ast.Assign | ast.AugAssign | ast.AnnAssign) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return set().union(*(_names(t) for t in targets))


def _additive(stmt: ast.Assign | ast.AugAssign | ast.AnnAssign, target: str, carried: set[str]) -> bool:
    """``target = target + e`` / ``e + target`` / ``target - e``, ``target += e`` / ``-= e``; ``e`` reads no
    carried value."""
    if isinstance(stmt, ast.AugAssign):
        return isinstance(stmt.op, (ast.Add, ast.Sub)) and not _names(stmt.value) & carried
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return False
    value = stmt.value
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub))):
        return False
    own = lambda e: isinstance(e, ast.Name) and e.id == target  # noqa: E731
    if own(value.left):
        return not _names(value.right) & carried
    return isinstance(value.op, ast.Add) and own(value.right) and not _names(value.left) & carried


def _imports_any(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.ImportFrom) and n.module == "typing" and any(a.name == "Any" and a.asname is None
               for a in n.names) for n in ast.walk(tree))  # fmt: skip
