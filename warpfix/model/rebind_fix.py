"""Where a rebinding codemod refuses, decided on the ``ast`` alone (``check``'s fix markers).

``warpfix check`` never loads libcst, yet marks a finding ``[*]`` only if ``warpfix apply`` fixes it.
The codemods of WF101, WF103, WF104, WF105 and WF106/WF107/WF401 rebind a place (``dst = src``,
``b = wp.empty_like(b)``, ``a = a_out`` after a launch) and refuse one that outlives the call at a
site a graph capture runs (:meth:`codemods._base.FindingCommand.refuse_if_captured`, worded by
:func:`warpfix.model.capture.rebinding_refusal`). :class:`RebindRefusals` finds, per rule, the place
and statement the codemod rebinds, the same way (the node on the finding's line it picks, which
argument, the callers a helper's parameter is handed back to) and says why the codemod refuses
only where it certainly does: a strategy that rebinds nothing (WF105's snapshot of the readers or deletion of a dead reset,
WF401's fold into the store before, WF104's fresh rotated slots) stays the codemod's call.
WF104's launch form is mirrored too where the codemod finds no output to allocate afresh, and its fresh
place for a local bound from a list slot or attribute (``x_next = self.x[(t + 1) % 2]``).
The ``ast`` shapes it looks for: :mod:`warpfix.model.rebind_shapes`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from warpfix.finding import Finding
from warpfix.model import Project
from warpfix.model.capture import has_capture, rebinding_refusal
from warpfix.model.local_binding import last_binding
from warpfix.model.rebind_shapes import (
    _FUNCS,
    _PLACES,
    _copy_operands,
    _is_kernel,
    _is_reset,
    _keyword,
    _listed,
    _name,
    _ordered,
    _place,
    _positional,
    _store_target,
    _swap_places,
    _target_names,
    _walk,
    _writes,
)
from warpfix.model.source import SourceFile, same_code

__all__ = ["RebindRefusals"]


class _Site:
    """One finding's file, seen the way its codemod sees it."""

    def __init__(self, refusals: RebindRefusals, src: SourceFile, finding: Finding) -> None:
        self.refusals, self.src, self.finding, self.line = refusals, src, finding, finding.line

    def code(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.src.text, node) or ast.unparse(node)

    def refused(self, why: str) -> str:
        """The codemod's ``not_applicable`` wording."""
        prefix = f"line {self.line}:"
        return why if why.startswith(prefix) else f"{prefix} {why}"

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.src.parents.get(id(node))

    def statement_of(self, node: ast.AST) -> ast.stmt | None:
        cur: ast.AST | None = node
        while cur is not None and not isinstance(cur, ast.stmt):
            cur = self.parent(cur)
        return cur

    def on_line(self, kind: type | tuple[type, ...], test: Callable[[ast.AST], bool]) -> ast.AST | None:
        """The codemod's ``on_line``: a node of ``kind`` covering the line, the one starting on it (nearest
        the column) first, then the innermost; the first in source order on a tie."""
        kinds = kind if isinstance(kind, tuple) else (kind,)
        found = _ordered([n for n in self.src.nodes_of(*kinds)
                          if n.lineno <= self.line <= (n.end_lineno or n.lineno) and test(n)])

        def rank(n: ast.AST) -> tuple[int, int, int]:
            span = self.src.span(n)
            starts = span.line == self.line
            col = abs(span.column - self.finding.span.column) if starts and self.finding.span.column else 0
            return (0 if starts else 1, col, (span.end_line - span.line) * 10_000 + (span.end_column - span.column))

        return min(found, key=rank) if found else None

    def captured(self, arg: ast.expr, stmt: ast.stmt, where: str) -> str | None:
        """:meth:`~codemods._base.FindingCommand.refuse_if_captured`'s reason, or None."""
        if not self.refusals.any_capture:
            return None
        funcs = self.src.enclosing_functions(stmt)
        if isinstance(arg, ast.Name) and funcs and not any(
            isinstance(n, (ast.Global, ast.Nonlocal)) and arg.id in n.names for n in ast.walk(funcs[0])
        ):
            return None  # a local of the function: rebound for this run only, captured with it
        why = rebinding_refusal(self.refusals.sources, self.finding.path, stmt.lineno, [f.name for f in funcs],
                                self.code(arg))
        return None if why is None else self.refused(f"{where}: {why}")

    def rebind(self, arg: ast.expr, stmt: ast.stmt, where: str, *, through_return: bool = False) -> str | None:
        """Why ``check_rebindable`` refuses ``arg = ...`` at ``stmt`` because of a capture, or None."""
        if not isinstance(arg, _PLACES) or any(isinstance(n, ast.Call) for n in ast.walk(arg)):
            return None  # refused, for another reason
        why = self.captured(arg, stmt, where)
        funcs = self.src.enclosing_functions(stmt)
        if why is not None or not (through_return and isinstance(arg, ast.Name) and funcs):
            return why
        func = funcs[0]
        assigned = {n for a in ast.walk(func) if isinstance(a, ast.Assign)
                    for t in a.targets for n in _target_names(t)}
        if arg.id in [a.arg for a in func.args.args] and arg.id not in assigned:
            return self.callers(func, arg.id)
        return None

    def callers(self, func: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> str | None:
        """``return_through``: each call statement ``func(..., a, ...)`` rebinds ``a``."""
        if func not in self.src.tree.body or any(
            isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) for s in func.body for n in ast.walk(s)
        ):
            return None  # refused, for another reason
        index = [a.arg for a in func.args.args].index(param)
        for node in _ordered([n for n in self.src.nodes_of(ast.Name) if n.id == func.name]):
            call = self.parent(node)
            if not (isinstance(call, ast.Call) and call.func is node and isinstance(self.parent(call), ast.Expr)):
                continue
            args = _positional(call)
            bound = _keyword(call, param) or (args[index] if index < len(args) else None)
            if bound is None or any(isinstance(a, ast.Starred) for a in call.args) or any(
                    k.arg is None for k in call.keywords):
                continue
            why = self.rebind(bound, self.parent(call), f"the call of {func.name}() at line {call.lineno}")
            if why is not None:
                return why
        return None


def _wf101(site: _Site) -> str | None:
    call = site.on_line(ast.Call, lambda c: _copy_operands(c) is not None)
    stmt = site.parent(call) if call is not None else None
    if not isinstance(stmt, ast.Expr):
        return None
    dst, _ = _copy_operands(call)
    return site.rebind(dst, stmt, f"line {site.line}", through_return=True)


def _wf103(site: _Site) -> str | None:
    if site.finding.data.get("repeat") not in (None, False, "", "false", "False", "0"):
        return None  # a fresh object per slot: nothing rebound
    assign = site.on_line(ast.Assign, lambda a: len(a.targets) == 1 and isinstance(a.targets[0], _PLACES)
                          and isinstance(a.value, _PLACES))
    if assign is None or any(isinstance(n, ast.Call) for n in ast.walk(assign)):
        return None
    return site.captured(assign.value, assign, f"line {site.line}")


def _wf104(site: _Site) -> str | None:
    data = site.finding.data
    swaps = _ordered([a for a in site.src.nodes_of(ast.Assign)
                      if a.lineno <= site.line <= (a.end_lineno or a.lineno) and _swap_places(a) is not None])
    if swaps:
        loop = next((p for p in _ancestors(site, swaps[0]) if isinstance(p, (ast.For, ast.AsyncFor, ast.While))), None)
        if loop is None:
            return None
        wanted = data.get("written") or data.get("arg")
        places = [p for p in _swap_places(swaps[0]) if not wanted or same_code(site.code(p), wanted)]
        for call in (n for s in loop.body for n in _walk(s) if isinstance(n, ast.Call)):
            outputs, inputs = _writes(call)
            hit = next((p for p in places if any(ast.unparse(o) == ast.unparse(p) for o in outputs)), None)
            if hit is not None:
                return _fresh_before(site, call, hit, inputs)
        return None
    if _rotated_slot(data.get("arg")):
        return None  # the codemod may rebuild the rotated slots instead
    state = _swapped_state(site, str(data.get("arg") or ""))
    if state is not None:
        return site.rebind(*state, f"line {site.line}")  # a fresh state per step (the codemod's _fresh_state)
    root = str(data.get("arg") or "").partition(".")[0]
    bound = last_binding(site.src, site.line, root) if root.isidentifier() else None
    if bound is not None and isinstance(bound[1], (ast.Subscript, ast.Attribute)):
        # the place the local came from gets the fresh buffer (the codemod's _fresh_bound_place)
        return site.captured(bound[1], bound[0], f"line {site.line}")
    call = site.on_line(ast.Call, lambda c: bool(_writes(c)[0]))
    if call is None:
        return site.refused("no two-buffer swap `a, b = b, a`")
    wanted = data.get("arg") or data.get("written")
    outputs, inputs = _writes(call)
    hit = next((o for o in outputs if wanted is None or same_code(site.code(o), wanted)), None)
    if hit is None or (wanted is None and len(outputs) != 1):
        return site.refused("cannot tell which output of the launch is the ping-pong buffer")
    return _fresh_before(site, call, hit, inputs)


def _swapped_state(site: _Site, arg: str) -> tuple[ast.expr, ast.stmt] | None:
    """(state, step statement) where WF104's codemod gives the step a fresh state (``_fresh_state``): a
    non-launch call on the line handed the state whose member ``arg`` is, swapped after it in its loop,
    and built by one call assigned outside the loop."""
    for call in _ordered([n for n in site.src.nodes_of(ast.Call) if n.lineno <= site.line <= (n.end_lineno or n.lineno)]):
        if _name(call.func) in ("launch", "copy"):
            continue
        place = next((a for a in call.args if isinstance(a, (ast.Name, ast.Attribute))
                      and (arg == site.code(a) or arg.startswith(site.code(a) + "."))), None)
        stmt = site.statement_of(call)
        loop = next((p for p in _ancestors(site, call) if isinstance(p, (ast.For, ast.AsyncFor, ast.While))), None)
        if place is None or stmt is None or loop is None or stmt not in loop.body:
            continue
        text = site.code(place)
        after = loop.body[loop.body.index(stmt) + 1:]
        if not any(isinstance(s, ast.Assign) and text in [site.code(p) for p in _swap_places(s) or ()] for s in after):
            continue
        inside = {id(n) for n in ast.walk(loop)}
        built = [a for a in site.src.nodes_of(ast.Assign) if id(a) not in inside and len(a.targets) == 1
                 and site.code(a.targets[0]) == text]
        if len(built) == 1 and isinstance(built[0].value, ast.Call) and all(
                isinstance(a, (ast.Name, ast.Attribute, ast.Constant)) for a in built[0].value.args):
            return place, stmt
    return None


def _fresh_before(site: _Site, call: ast.Call, hit: ast.expr, inputs: list[ast.expr]) -> str | None:
    stmt = site.statement_of(call)
    if stmt is None or any(ast.unparse(i) == ast.unparse(hit) for i in inputs):
        return None
    return site.rebind(hit, stmt, f"line {site.line}", through_return=True)


def _rotated_slot(arg: object) -> bool:
    """Whether WF104's codemod would try ``_fresh_rotated_slots`` on the finding's ``arg``."""
    try:
        place: ast.expr | None = ast.parse(arg, mode="eval").body if isinstance(arg, str) and arg else None
    except SyntaxError:
        return False
    while isinstance(place, (ast.Attribute, ast.Subscript)) and not (
            isinstance(place, ast.Subscript) and isinstance(place.value, (ast.Name, ast.Attribute))):
        place = place.value
    return isinstance(place, ast.Subscript)


def _wf105(site: _Site) -> str | None:
    call = site.on_line(ast.Call, _is_reset)
    stmt = site.parent(call) if call is not None else None
    if not isinstance(stmt, ast.Expr) or site.finding.data.get("snapshot") or site.finding.data.get("dead_after"):
        return None  # the readers may read a snapshot instead, or the dead reset goes: nothing rebound
    target = call.func.value
    if isinstance(target, ast.Attribute) and target.attr == "grad":
        return None
    why = site.rebind(target, stmt, f"line {site.line}", through_return=True)
    reason = site.finding.data.get("snapshot_refused") or "the finding names no reader"
    dead = site.finding.data.get("dead_refused") or "the finding does not say"
    return None if why is None else \
        f"{why}; reading a snapshot instead does not apply: {reason}; deleting the reset does not apply: {dead}"


def _wf401(site: _Site) -> str | None:
    """WF106/WF107/WF401: a launch of the kernel in its own file rebinds the argument it passes."""
    store = site.on_line((ast.Assign, ast.AugAssign), lambda n: _store_target(n) is not None)
    kernel = next((f for f in _ancestors(site, store) if isinstance(f, _FUNCS)), None) if store else None
    place = _place(_store_target(store).value) if store is not None else None
    if not _is_kernel(kernel) or place is None or _may_fold(site, kernel, store, place):
        return None
    params = [a.arg for a in kernel.args.args]
    param = place.partition(".")[0]
    if param not in params or site.finding.data.get("kernel") not in (None, kernel.name):
        return None
    for call in _ordered([n for n in site.src.nodes_of(ast.Call) if _name(n.func) == "launch"]):
        ref = _keyword(call, "kernel") or (call.args[0] if call.args else None)
        stmt = site.parent(call)
        if not (isinstance(ref, ast.Name) and ref.id == kernel.name and isinstance(stmt, ast.Expr)):
            continue
        bound = _listed(call, "inputs", 2) + _listed(call, "outputs", 3)
        if params.index(param) < len(bound):
            why = site.rebind(bound[params.index(param)], stmt, f"the launch at line {call.lineno}",
                              through_return=True)
            if why is not None:
                return why
    return None


def _may_fold(site: _Site, kernel: ast.AST, store: ast.stmt, place: str) -> bool:
    """Whether the codemod may fold ``a[i] *= b`` into the store ``a[i] = e`` right before it (no launch
    changes); a superset of its test."""
    if not (isinstance(store, ast.AugAssign) and isinstance(store.op, (ast.Mult, ast.Div))):
        return False
    stores = [n for n in _walk(kernel) if isinstance(n, (ast.Assign, ast.AugAssign))
              and (t := _store_target(n)) is not None and _place(t.value) == place]
    return len(stores) == 2 and stores[1] is store and isinstance(stores[0], ast.Assign)


def _ancestors(site: _Site, node: ast.AST) -> Iterator[ast.AST]:
    cur = site.parent(node)
    while cur is not None:
        yield cur
        cur = site.parent(cur)


_BY_RULE: dict[str, Callable[[_Site], str | None]] = {
    "WF101": _wf101, "WF103": _wf103, "WF104": _wf104, "WF105": _wf105,
    "WF106": _wf401, "WF107": _wf401, "WF401": _wf401,
}


class RebindRefusals:
    """Why the codemod of a finding certainly refuses its rebinding (:data:`_BY_RULE`), or None."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._sources: dict[str, str] | None = None
        self.any_capture = any(has_capture(src.text) for src in project.files.values())

    @property
    def sources(self) -> dict[str, str]:
        """The project's texts (what ``apply`` hands the codemods)."""
        if self._sources is None:
            self._sources = {p: src.text for p, src in self.project.files.items()}
        return self._sources

    def __call__(self, finding: Finding) -> str | None:
        handler = _BY_RULE.get(finding.rule)
        src = self.project.files.get(finding.path) if handler is not None else None
        return handler(_Site(self, src, finding)) if src is not None else None
