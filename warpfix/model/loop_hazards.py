"""Kernel loops for WF403: which loops Warp leaves dynamic (not unrolled), and the values a dynamic
loop carries from one iteration to the next that the adjoint needs although a later iteration
overwrote them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from warpfix.model.facts import KernelDef
from warpfix.model.kernel_flow import COMPOSITE_CTORS, FLAT_CALLS, NO_VALUE_CALLS, Flow, is_array_annotation
from warpfix.model.reach import function_body_nodes
from warpfix.model.source import SourceFile

MAX_UNROLL = 16  # Warp's default ``max_unroll``


# ---------------------------------------------------------------------------------------------
# Loops
# ---------------------------------------------------------------------------------------------
def _max_unroll(kd: KernelDef) -> int:
    for opts in (kd.options, kd.options.get("module_options")):
        if isinstance(opts, dict) and isinstance(opts.get("max_unroll"), int):
            return opts["max_unroll"]
    return MAX_UNROLL


def _module_int(src: SourceFile, name: str) -> int | None:
    for stmt in src.tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in stmt.targets
        ):
            value = stmt.value
            if isinstance(value, ast.Call) and src.is_warp(value.func, "constant") and value.args:
                value = value.args[0]
            if isinstance(value, ast.Constant) and isinstance(value.value, int):
                return value.value
    return None


def local_names(fn: ast.FunctionDef) -> set[str]:
    """Parameters and every name bound inside ``fn``."""
    names = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    for node in function_body_nodes(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def is_dynamic_loop(src: SourceFile, kd: KernelDef, loop: ast.For | ast.While, bound: set[str]) -> bool:
    """Whether Warp generates a dynamic (not unrolled) loop: a ``while``, or a ``range`` whose
    bounds depend on launch-time values (parameters, locals, array shapes), or a constant range
    longer than ``max_unroll`` or containing ``break``. Bounds Warp folds at codegen time
    (literals, module constants, closure values, ``wp.static(...)``) give a static loop."""
    if isinstance(loop, ast.While):
        return True
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
        return not (isinstance(it, ast.Call) and src.is_warp(it.func, "static"))
    values: list[int | None] = []
    for arg in it.args:
        if isinstance(arg, ast.Call) and src.is_warp(arg.func, "static"):
            return False  # a loop with static expressions is always unrolled
        ids = [n.id for n in ast.walk(arg) if isinstance(n, ast.Name)]
        if any(i in bound for i in ids) or any(isinstance(n, ast.Call) for n in ast.walk(arg)):
            return True
        try:
            values.append(int(ast.literal_eval(arg)))
        except (ValueError, TypeError, SyntaxError):
            values.append(_module_int(src, arg.id) if isinstance(arg, ast.Name) else None)
    if any(isinstance(n, ast.Break) for n in ast.walk(loop)):
        return True
    if None in values or not values:
        return False  # a closure/global constant of unknown value: Warp unrolls it when small
    return len(range(*values)) > _max_unroll(kd)  # type: ignore[arg-type]


_LINEAR_CALLS = frozenset(
    {
        "float", "float16", "float32", "float64", "add", "sub", "neg", "pos", "min", "max",
        "atomic_add", "atomic_sub", "copy", "transpose", "static", "extract",
        "tile_store", "tile_atomic_add", "tile_sum", "tile_transpose", "tile_broadcast", "tile_reshape",
        "tile_squeeze", "tile_view", "tile", "untile", "tile_astype",
    }
    | COMPOSITE_CTORS
)  # fmt: skip


def adjoint_reads(flow: Flow, node: ast.expr) -> list[tuple[ast.expr, list[ast.expr]]]:
    """For a non-linear expression: (operand, the expressions whose values its adjoint reads)."""
    if isinstance(node, ast.BinOp):
        left, right = node.left, node.right
        if isinstance(node.op, (ast.Mult, ast.MatMult)):
            return [(left, [right]), (right, [left])]
        if isinstance(node.op, ast.Div):
            return [(left, [right]), (right, [left, right])]
        if isinstance(node.op, (ast.Pow, ast.Mod)):
            return [(left, [left, right]), (right, [left, right])]
        return []
    if isinstance(node, ast.Call):
        name = flow.call_name(node)
        if name is None or name in _LINEAR_CALLS or name in FLAT_CALLS or name in NO_VALUE_CALLS:
            return []
        args = list(node.args)
        if name in ("where", "select") and len(args) == 3:
            return [(args[1], [args[0]]), (args[2], [args[0]])]
        return [(a, args) for a in args]
    return []


@dataclass
class LoopHazard:
    loop: ast.For | ast.While
    stmt: ast.stmt
    node: ast.expr
    carried: str
    operand: ast.expr
    after: bool  # used after the loop (True) or inside it (False)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for s in body:
        yield s
        for field_name in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(s, field_name, []) or [])


def _exprs_of(stmt: ast.stmt) -> Iterator[ast.expr]:
    """The expressions evaluated by ``stmt`` itself (not by nested statements), with augmented
    assignments expanded to their binary operation."""
    if isinstance(stmt, ast.AugAssign):
        load = ast.Name(stmt.target.id, ast.Load()) if isinstance(stmt.target, ast.Name) else stmt.target
        yield ast.copy_location(ast.BinOp(load, stmt.op, stmt.value), stmt)
        return
    for field_name, value in ast.iter_fields(stmt):
        if field_name in ("body", "orelse", "finalbody", "targets", "target"):
            continue
        if isinstance(value, ast.expr):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, ast.expr))
    for t in getattr(stmt, "targets", []) or [getattr(stmt, "target", None)]:
        if isinstance(t, ast.Subscript):
            yield t.slice


def dynamic_loop_hazards(
    src: SourceFile, kd: KernelDef, fn: ast.FunctionDef, no_gradient: frozenset[str] = frozenset()
) -> Iterator[LoopHazard]:
    """Adjoints that read a value a dynamic loop carries across iterations (inside the loop),
    or that the loop computed (after it): backward sees the wrong value of it. ``no_gradient``: array
    parameters whose adjoint reaches no gradient (every recorded launch passes an array without one), so a
    stale value read only to compute their adjoint harms nothing."""
    flow = Flow(src, kd, fn)
    flow.sources -= no_gradient
    bound = local_names(fn)
    stmts = list(_statements(fn.body))
    order = {id(s): n for n, s in enumerate(stmts)}
    seen: set[int] = set()
    for loop in stmts:
        if not isinstance(loop, (ast.For, ast.While)) or not is_dynamic_loop(src, kd, loop, bound):
            continue
        inner = list(_statements(loop.body))
        inner_ids = {id(s) for s in inner}
        assigned_in = {
            n.id
            for s in inner
            for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        before = {n for s in stmts[: order[id(loop)]] for n in _stored_names(s)}
        carried = (assigned_in & before) - flow.loop_vars
        if not carried:
            continue
        after = [
            s
            for s in stmts[order[id(loop)] + 1 :]
            if id(s) not in inner_ids and s.lineno > (loop.end_lineno or 0)
        ]
        # Backward re-runs the iterations in reverse order, each starting from the carried values
        # of the *forward* iteration with the same rank. A body that uses its loop variable sees
        # misaligned iterations; one that does not is consistent except for reads of a carried
        # local that precede its update in the iteration (the adjoint reads the updated value).
        targets = _names_of(loop.target) if isinstance(loop, ast.For) else set()
        uses_index = any(
            isinstance(n, ast.Name) and n.id in targets and isinstance(n.ctx, ast.Load)
            for s in loop.body
            for n in ast.walk(s)
        )
        last_update = {
            c: max((i for i, s in enumerate(inner) if c in _stored_names(s)), default=len(inner))
            for c in carried
        }
        # Each reverse iteration replays the body before its adjoints, so inside the loop only a
        # local that an iteration reads before it assigns it is carried (`j = start + i` is not);
        # after the loop every local the loop assigns still has its pre-loop value in backward.
        carried_in_body = _read_before_assigned(inner, carried)
        for stmt_list, is_after in ((inner, False), (after, True)):
            for pos, stmt in enumerate(stmt_list):
                if id(stmt) in seen:
                    continue
                live = carried if is_after else carried_in_body
                if not is_after and not uses_index and isinstance(loop, ast.For):
                    live = {c for c in carried if last_update[c] >= pos}
                hazard = _first_hazard(flow, stmt, live) if live else None
                if hazard is not None:
                    seen.add(id(stmt))
                    node, name, operand = hazard
                    yield LoopHazard(loop, stmt, node, name, operand, is_after)


def _read_before_assigned(body: list[ast.stmt], names: set[str]) -> set[str]:
    """The ``names`` an iteration of ``body`` (statements in execution order) reads before it assigns them."""
    out: set[str] = set()
    assigned: set[str] = set()
    for s in body:
        if isinstance(s, (ast.If, ast.While)):
            parts: list[ast.AST] = [s.test]
        elif isinstance(s, ast.For):
            parts = [s.iter]
        elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
            parts = [s]
        else:
            parts = []
        loads = {n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if isinstance(s, ast.AugAssign):
            loads |= _names_of(s.target)
        out |= (loads & names) - assigned
        assigned |= _stored_names(s)
    return out


def _names_of(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _stored_names(stmt: ast.stmt) -> set[str]:
    """Names bound by ``stmt`` itself (not by statements nested in it)."""
    if isinstance(stmt, ast.Assign):
        targets: list[ast.expr] = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For)):
        targets = [stmt.target]
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _gradient_array(flow: Flow, node: ast.expr) -> bool:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return (
        isinstance(node, ast.Name)
        and node.id in flow.sources
        and is_array_annotation(flow.src, flow.params.get(node.id))
    )


def _index_hazard(flow: Flow, stmt: ast.stmt, carried: set[str]) -> tuple[ast.expr, str] | None:
    """An element of a gradient-carrying array addressed by a carried index: its adjoint is
    read from / scattered to the element the stale index names."""
    roots: list[ast.AST] = list(_exprs_of(stmt))
    roots += getattr(stmt, "targets", []) or (
        [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) else []
    )
    for root in roots:
        for node in ast.walk(root):
            if isinstance(node, ast.Subscript) and _gradient_array(flow, node.value):
                hit = flow.depends_on(node.slice, carried)
            elif (
                isinstance(node, ast.Call)
                and flow.call_name(node) in ("atomic_add", "atomic_sub")
                and len(node.args) > 2
                and _gradient_array(flow, node.args[0])
            ):
                hit = next(filter(None, (flow.depends_on(a, carried) for a in node.args[1:-1])), None)
            else:
                continue
            if hit:
                return node, hit
    return None


def _first_hazard(flow: Flow, stmt: ast.stmt, carried: set[str]) -> tuple[ast.expr, str, ast.expr] | None:
    indexed = _index_hazard(flow, stmt, carried)
    if indexed is not None:
        return indexed[0], indexed[1], indexed[0]
    for expr in _exprs_of(stmt):
        for node in ast.walk(expr):
            if not isinstance(node, ast.expr):
                continue
            for operand, reads in adjoint_reads(flow, node):
                if not flow.carries_gradient(operand):
                    continue
                for r in reads:
                    hit = flow.depends_on(r, carried)
                    if hit:
                        return node, hit, operand
    return None
