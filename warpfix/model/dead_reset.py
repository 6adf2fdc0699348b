"""Whether a ``self.x.zero_()`` / ``self.x.fill_(v)`` is dead: nothing but the tape's backward sees what it writes.

WF105's last strategy deletes such a reset. The shape (a trainer's ``forward()`` that resets a buffer
before accumulating into it, and again after the loss read it)::

    def forward(self):
        self.com.zero_()                                   # the covering reset
        wp.launch(com_kernel, ..., inputs=[q, n, self.com])
        wp.launch(loss_kernel, ..., inputs=[self.com, ...])
        self.com.zero_()                                   # dead: WF105, deleted

Deleting the second reset keeps every forward value bit for bit when the array's old contents cannot
be observed between it and the next covering reset. That is proven on the ``ast`` of the whole
project, conservatively:

* the reset is ``<self>.<attr>.zero_()`` / ``.fill_(v)``, or of an element ``<self>.<attr>[i]`` (bear's
  per-frame ``self.coms[frame]``), in a method, not inside a loop of it, and the method is no generator;
* every use of ``<attr>`` (an attribute of that name on any object, in any file of the project) is
  ``.grad`` of it, a reset statement, a rebinding to a fresh allocation (``self.com = wp.zeros(...)``,
  or a list of them built by ``= []`` and ``.append(wp.zeros(...))``), or, in that method only, an
  argument of a launch, used whole or as the very element the reset resets (the same index text: a
  read of another element may read what an earlier call reset); the dead reset is the method's last use;
* the array is reset again before anything reads it: the method's first use is a reset that runs on
  every call (nothing but ``with`` blocks around it), or, in every host trace the reset runs in, the
  next event that touches the array after each run of it is a reset as unconditional as it
  (:func:`reset_successors`: soft_body's ``step()`` resets ``self.com`` after ``forward()``).

Then only the method's launches read the array, each after a reset that follows the dead one: what
the dead reset writes is seen by the backward's replay of the recorded readers alone, which is what
the fix changes. (Code outside the project, e.g. a library runner reading ``example.com``, is not seen.)
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from warpfix.finding import Span
from warpfix.model.facts import Event, Trace
from warpfix.model.hazards import unresolved_element
from warpfix.model.source import SourceFile

__all__ = ["covering_reset", "is_reset", "merge_successors", "reset_successors"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FRESH = frozenset({"zeros", "empty", "ones", "full", "zeros_like", "empty_like", "ones_like", "full_like", "clone"})
_REFLECTION = frozenset({"getattr", "setattr", "delattr", "hasattr"})


def is_reset(call: ast.AST) -> bool:
    """``x.zero_()`` or ``x.fill_(v)``."""
    return (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
        and ((call.func.attr == "zero_" and not call.args) or (call.func.attr == "fill_" and len(call.args) == 1))
        and not call.keywords
    )


def _reset_statement(src: SourceFile, mention: ast.Attribute) -> ast.Expr | None:
    """The statement ``mention.zero_()`` / ``mention.fill_(v)`` when ``mention`` is that reset's array."""
    method = src.parents.get(id(mention))
    call = src.parents.get(id(method)) if isinstance(method, ast.Attribute) and method.value is mention else None
    stmt = src.parents.get(id(call)) if call is not None and is_reset(call) else None
    return stmt if isinstance(stmt, ast.Expr) else None


def _launch_argument(src: SourceFile, mention: ast.Attribute) -> bool:
    """``mention`` is an element of a ``wp.launch`` / ``wp.launch_tiled`` argument list (inputs, outputs)."""
    seq = src.parents.get(id(mention))
    if not isinstance(seq, (ast.List, ast.Tuple)):
        return False
    holder = src.parents.get(id(seq))
    call = src.parents.get(id(holder)) if isinstance(holder, ast.keyword) else holder
    if not (isinstance(call, ast.Call) and src.is_warp(call.func, "launch", "launch_tiled")):
        return False
    return (isinstance(holder, ast.keyword) and holder.arg in ("inputs", "outputs")) or seq in call.args[2:4]


def _fresh(src: SourceFile, value: ast.expr) -> bool:
    """``wp.zeros(...)`` and friends, or ``wp.array(<host data>)`` from a literal or a numpy call (a copy)."""
    if not isinstance(value, ast.Call):
        return False
    if src.is_warp(value.func, *_FRESH):
        return True
    if not src.is_warp(value.func, "array") or any(k.arg in ("ptr", "copy") for k in value.keywords):
        return False
    data = value.args[0] if value.args else next((k.value for k in value.keywords if k.arg == "data"), None)
    host = isinstance(data, ast.Call) and isinstance(data.func, ast.Attribute) and isinstance(data.func.value, ast.Name) \
        and data.func.value.id in ("np", "numpy")
    return host or isinstance(data, (ast.List, ast.Tuple, ast.ListComp))


def _fresh_rebinding(src: SourceFile, mention: ast.Attribute) -> bool:
    """``<obj>.<attr> = wp.zeros(...)`` (a fresh allocation, nothing else reaches it), or a list of fresh
    arrays built in place: ``<obj>.<attr> = []`` and ``<obj>.<attr>.append(wp.zeros(...))``."""
    up = src.parents.get(id(mention))
    if isinstance(up, ast.Assign) and up.targets == [mention]:
        value = up.value
        return _fresh(src, value) or (isinstance(value, ast.List) and not value.elts)
    call = src.parents.get(id(up)) if isinstance(up, ast.Attribute) and up.attr == "append" else None
    return isinstance(call, ast.Call) and call.func is up and len(call.args) == 1 and _fresh(src, call.args[0])


def _place(src: SourceFile, mention: ast.Attribute) -> ast.expr:
    """``mention``, or the element ``mention[i]`` when it is subscripted (a list of per-frame arrays)."""
    up = src.parents.get(id(mention))
    return up if isinstance(up, ast.Subscript) and up.value is mention else mention


def _of_grad(src: SourceFile, place: ast.expr) -> bool:
    up = src.parents.get(id(place))
    return isinstance(up, ast.Attribute) and up.attr == "grad"


def _straight(src: SourceFile, stmt: ast.stmt, func: ast.AST) -> bool:
    """Only ``with`` blocks lie between ``stmt`` and ``func``: it runs on every call."""
    cur = src.parents.get(id(stmt))
    while cur is not None and cur is not func:
        if isinstance(cur, ast.stmt) and not isinstance(cur, (ast.With, ast.AsyncWith)):
            return False
        cur = src.parents.get(id(cur))
    return cur is func


def _in_loop(src: SourceFile, node: ast.AST, func: ast.AST) -> bool:
    cur = src.parents.get(id(node))
    while cur is not None and cur is not func:
        if isinstance(cur, (ast.For, ast.AsyncFor, ast.While, *_FUNCS, ast.Lambda)):
            return True
        cur = src.parents.get(id(cur))
    return False


def reset_successors(trace: Trace) -> dict[Span, tuple[bool, int | None]]:
    """For each ``zero_`` / ``fill_`` of ``trace`` (by its span): whether, after each of its runs, the
    next event that touches its array (reads, writes or accumulates into it or a view of it) is a
    reset of the whole array that runs whenever it does; and the line of such a reset in its file
    (None: nothing touches the array after it). One backward pass over the events."""
    out: dict[Span, tuple[bool, int | None]] = {}
    following: dict[int, Event] = {}  # array root id -> the next event touching it
    for ev in reversed(trace.events):
        touched = {b.root().id for b in (*ev.reads, *ev.writes, *ev.accums)}
        if ev.kind in ("zero", "fill") and len(ev.writes) == 1:
            root = ev.writes[0].root().id
            nxt = following.get(root)
            ok, line = out.get(ev.span, (True, None))
            if unresolved_element(ev.writes[0]):
                ok = False  # ``xs[expr]`` with an index not evaluated: one buffer for many arrays
            elif nxt is not None:
                whole = nxt.kind in ("zero", "fill") and all(
                    b.id == root for b in (*nxt.reads, *nxt.writes, *nxt.accums) if b.root().id == root)
                ok = ok and whole and set(nxt.branches) <= set(ev.branches)
                if ok and nxt.span.path == ev.span.path:
                    line = nxt.span.line if line is None else min(line, nxt.span.line)
            out[ev.span] = (ok, line)
        for root in touched:
            following[root] = ev
    return out


def merge_successors(into: dict[Span, tuple[bool, int | None]], more: dict[Span, tuple[bool, int | None]]) -> None:
    """Fold one trace's :func:`reset_successors` into those of the traces before it."""
    for span, (ok, line) in more.items():
        was_ok, was_line = into.get(span, (True, None))
        lines = [n for n in (was_line, line) if n is not None]
        into[span] = (was_ok and ok, min(lines) if lines else None)


def covering_reset(files: Mapping[str, SourceFile], src: SourceFile, call: ast.Call,
                   followed: int | None = None) -> tuple[int | None, str]:
    """(line of the reset that overwrites the array before anything else uses it, "") when the reset
    ``call`` is dead (see the module docstring), else (None, why not). ``followed``: the line of the
    reset that :func:`reset_successors` found after it in every trace it runs in."""
    stmt = src.parents.get(id(call))
    target = call.func.value if isinstance(call.func, ast.Attribute) else None
    funcs = src.enclosing_functions(call)
    if not isinstance(stmt, ast.Expr) or not funcs:
        return None, "the reset is not a statement of a method"
    func = funcs[0]
    params = func.args.posonlyargs + func.args.args
    base = target.value if isinstance(target, ast.Subscript) else target
    if not (isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and params
            and base.value.id == params[0].arg):
        return None, (f"`{ast.unparse(target) if target else '?'}` is not an attribute of `{func.name}`'s object "
                      "or an element of one")
    attr, self_name = base.attr, base.value.id
    if _in_loop(src, stmt, func):
        return None, f"the reset is inside a loop of `{func.name}`"
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(func)):
        return None, f"`{func.name}` is a generator or coroutine"
    inside: list[ast.Attribute] = []
    for path, other in files.items():
        for node in other.nodes_of(ast.Attribute):
            if node.attr != attr:
                continue
            place = _place(other, node)
            if _of_grad(other, place):
                continue  # the gradient array: no reset writes it
            if other is src and func.lineno <= node.lineno <= (func.end_lineno or func.lineno) \
                    and other.enclosing_functions(node)[:1] == [func]:
                inside.append(node)
            elif not _fresh_rebinding(other, node) and _reset_statement(other, place) is None:
                return None, f"`.{attr}` is used at {path}:{node.lineno}, outside `{func.name}`"
        for node in other.nodes_of(ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in _REFLECTION and any(
                    isinstance(a, ast.Constant) and a.value == attr for a in node.args):
                return None, f"`{node.func.id}` names `{attr}` at {path}:{node.lineno}"
    inside.sort(key=lambda n: (n.lineno, n.col_offset))
    text = ast.unparse(target)
    if not inside or inside[-1] is not base:
        return None, f"`{self_name}.{attr}` is used after the reset in `{func.name}`"
    for node in inside:
        place = _place(src, node)
        if not (isinstance(node.value, ast.Name) and node.value.id == self_name):
            return None, f"`{ast.unparse(node)}` at line {node.lineno} may be another object's `{attr}`"
        if (place is node) is not (target is base) or (target is not base and ast.unparse(place) != text):
            return None, f"`{ast.unparse(place)}` at line {node.lineno} is not used as `{text}` is"
        if _reset_statement(src, place) is None and not _launch_argument(src, place):
            return None, f"`{ast.unparse(place)}` at line {node.lineno} is used other than by a launch or a reset"
    first = _reset_statement(src, _place(src, inside[0]))
    if first is not None and inside[0] is not base and _straight(src, first, func) \
            and ast.unparse(_place(src, inside[0])) == text:
        return first.lineno, ""
    if followed is not None:
        return followed, ""
    return None, (f"`{func.name}` does not reset `{text}` on every call before it first uses it, "
                  "nor does a reset follow it before the next use")
