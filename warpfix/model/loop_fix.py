"""Where WF403's codemod (``codemods/wf403_static_bound.py``) refuses, decided on the ``ast`` alone.

``warpfix check`` never loads libcst, yet marks a finding ``[*]`` only if ``warpfix apply`` fixes it.
The codemod and the detector share what can be shared (:func:`module_constants`, the loop-into-a-
``@wp.func`` test :func:`loop_signature`); :func:`fix_refusal` mirrors the codemod's other checks
and says why there is no edit only where the codemod certainly refuses (a launch's bound it cannot
decide, an imported constant, stays the codemod's call).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

__all__ = ["MAX_UNROLL", "NotExtractable", "fix_refusal", "loop_signature", "module_constants"]

MAX_UNROLL = 16  # warp.config.max_unroll's default: the largest bound the codemod makes static


def module_constants(tree: ast.Module) -> dict[str, int]:
    """Module-level ``NAME = <int>`` assigned exactly once in the whole file and never declared global."""
    values: dict[str, int] = {}
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int):
            values[stmt.targets[0].id] = stmt.value.value
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.Global):
            for name in node.names:
                counts[name] = counts.get(name, 0) + 2
        elif isinstance(node, ast.arg):
            counts[node.arg] = counts.get(node.arg, 0) + 2
    return {k: v for k, v in values.items() if counts.get(k) == 1}


def bound_param(loop: ast.For, params: list[str]) -> str | None:
    """``n`` of ``for _ in range(n)`` / ``range(k, n)`` (k a literal), when ``n`` is a kernel parameter."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
        return None
    if not 1 <= len(it.args) <= 2 or it.keywords or any(isinstance(a, ast.Starred) for a in it.args):
        return None
    if len(it.args) == 2 and not (isinstance(it.args[0], ast.Constant) and type(it.args[0].value) is int):
        return None
    stop = it.args[-1]
    return stop.id if isinstance(stop, ast.Name) and stop.id in params else None


#: One launch of a kernel the model saw: (the launching file's tree, the launch call, kernel param -> argument).
Launch = tuple[ast.Module, ast.Call, dict[str, ast.expr]]


def _plain_launch(call: ast.Call, kernel: str) -> bool:
    """``wp.launch(kernel, ..., inputs=[...], outputs=[...])``: the launch shape the codemod reads."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "launch"
            or isinstance(call.func, ast.Name) and call.func.id == "launch"):
        return False
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    ref = kw.get("kernel", call.args[0] if call.args else None)
    if not (isinstance(ref, ast.Name) and ref.id == kernel or isinstance(ref, ast.Attribute) and ref.attr == kernel):
        return False
    for slot, pos in (("inputs", 2), ("outputs", 3)):
        holder = kw.get(slot, call.args[pos] if len(call.args) > pos else None)
        if holder is not None and (not isinstance(holder, (ast.List, ast.Tuple))
                                   or any(isinstance(e, ast.Starred) for e in holder.elts)):
            return False
    return True


def _launch_refusal(kernel: str, param: str, launches: Iterable[Launch]) -> str | None:
    """Why the launches' values of the bound ``param`` cannot become ``wp.static(C)``, where certain."""
    values: set[int] = set()
    for tree, call, args in launches:
        arg = args.get(param)
        if arg is None or not _plain_launch(call, kernel):
            continue
        constants = module_constants(tree)
        if isinstance(arg, ast.Constant) and type(arg.value) is int:
            values.add(arg.value)
        elif isinstance(arg, ast.Name) and arg.id in constants:
            values.add(constants[arg.id])
        elif not isinstance(arg, ast.Name) or any(
                isinstance(n, ast.Name) and n.id == arg.id and isinstance(n.ctx, ast.Store) for n in ast.walk(tree)):
            return (f"the launch at line {call.lineno} binds the bound `{param}` to `{ast.unparse(arg)}`, not an integer "
                    "literal or a module constant assigned once")
    if len(values) > 1:
        return f"the launches of {kernel} pass different bounds {sorted(values)}"
    if values and not 0 <= min(values) <= max(values) <= MAX_UNROLL:
        return f"the launches pass {max(values)}, more than max_unroll ({MAX_UNROLL})"
    return None


def _contains(outer: ast.stmt, inner: ast.AST) -> bool:
    return outer is not inner and any(n is inner for n in ast.walk(outer))


def fix_refusal(tree: ast.Module, fn: ast.FunctionDef, is_func: bool, loop: ast.For | ast.While,
                stmt: ast.stmt, after: bool, launches: Iterable[Launch]) -> str | None:
    """Why the codemod makes no edit for a WF403 hazard at ``stmt`` (``after`` the dynamic ``loop`` or
    inside it) in the kernel or ``@wp.func`` ``fn``; None when it may make one. ``launches``: the
    kernel's launches the model saw."""
    loops = [n for n in ast.walk(fn) if isinstance(n, ast.For)]
    if is_func:
        if any(_contains(n, stmt) for n in loops):
            return "the loop is in a @wp.func: its bound comes from its callers"
        return None  # the post-processing moves to the callers: the codemod decides
    if not isinstance(loop, ast.For):
        return "the dynamic loop is a `while` loop"
    if any(_contains(n, loop) for n in loops):
        return "the loop is nested in another loop"
    params = [a.arg for a in fn.args.args]
    param = bound_param(loop, params)
    if param is None:
        why = f"the loop bound `{ast.unparse(loop.iter)}` is not `range(<parameter>)`"
    elif any(isinstance(n, (ast.Break, ast.Continue)) for s in loop.body for n in ast.walk(s)):
        why = "the loop holds break/continue"
    else:
        why = _launch_refusal(fn.name, param, launches)
    if why is None or not after:
        return why
    try:
        loop_signature(tree, fn, loop)
    except NotExtractable as extract:
        return f"{why}; nor can the loop become a @wp.func: {extract}"
    return None


class NotExtractable(Exception):
    """Why the loop cannot become a function (the reason is the message)."""


def loop_signature(tree: ast.Module, fn: ast.FunctionDef, loop: ast.For) -> tuple[list[str], list[str]]:
    """(the new function's parameters, the values it returns) for moving ``loop`` of the kernel ``fn``
    (defined in ``tree``) into a ``@wp.func``. Raises :class:`NotExtractable` with the reason when the
    shape does not allow it."""
    if fn not in tree.body:
        raise NotExtractable("the kernel is defined inside a function or class: its loop may read names of that "
                             "scope, which a module-level function would not see")
    signature = _signature(fn, loop)
    if any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(tree)) and not _imports_any(tree):
        raise NotExtractable("the module binds `Any` to something else than typing.Any")
    return signature


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
