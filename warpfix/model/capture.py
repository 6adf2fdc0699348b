"""Which functions run inside a graph capture (``wp.ScopedCapture``, ``wp.capture_begin/end``).

A captured graph records the launches (and their arrays) of one run of its body; every
``wp.capture_launch`` replays those launches on those arrays and never reruns the Python around
them. A codemod that rebinds a name (``a = a_out`` after a launch, ``x = f(x)`` at a call) in code
a capture runs is therefore wrong on the graph path: the first run rebinds, the replays keep
reading and writing the arrays captured then, while the program's names hold the new ones (the
optimizer updates an array the graph no longer reads). The rebinding codemods refuse such sites
(:meth:`codemods._base.FindingCommand.check_rebindable`), with the reason
:func:`rebinding_refusal` words; ``warpfix check`` drops the fix marker of a finding whose codemod
would refuse so (:mod:`warpfix.model.capture_fix`).

The analysis is by name and over-approximates (a call ``self.solver.step(...)`` in a captured
body makes every function named ``step`` of the project captured, and what those call): a site
it wrongly counts as captured loses an automatic edit, one it missed would be a wrong edit.
A project with no capture anywhere costs one substring search per file.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping, Sequence

_MARKERS = ("ScopedCapture", "capture_begin")
#: the last project asked about: (key of its sources, result)
_CACHE: list[tuple[tuple, dict[str, tuple[str, int]]]] = []


def has_capture(text: str) -> bool:
    """Whether ``text`` may capture a graph at all (a substring test)."""
    return any(m in text for m in _MARKERS)


def captured_functions(sources: Mapping[str, str]) -> dict[str, tuple[str, int]]:
    """Name of every function a captured region of ``sources`` (path -> text) runs -> (path, line)
    of that capture."""
    key = tuple(sorted((p, hash(t)) for p, t in sources.items()))
    for cached_key, result in _CACHE:
        if cached_key == key:
            return result
    result = _captured(sources) if any(has_capture(t) for t in sources.values()) else {}
    _CACHE[:] = [(key, result)]
    return result


def _captured(sources: Mapping[str, str]) -> dict[str, tuple[str, int]]:
    trees = {}
    for path, text in sources.items():
        try:
            trees[path] = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
    defs: dict[str, list[ast.AST]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defs.setdefault(node.name, []).append(node)
    out: dict[str, tuple[str, int]] = {}
    todo: list[tuple[str, tuple[str, int]]] = []
    for path, tree in trees.items():
        for start, region in captured_regions(tree):
            todo.extend((name, (path, start)) for stmt in region for name in _called(stmt))
    while todo:
        name, where = todo.pop()
        if name in out:
            continue
        out[name] = where
        for func in defs.get(name, ()):
            todo.extend((callee, where) for callee in _called(func) if callee not in out)
    return out


def capture_at(text: str, line: int) -> int | None:
    """The line of the capture whose region (in ``text``) holds ``line``, None when none does."""
    if not has_capture(text):
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    for start, region in captured_regions(tree):
        if region and region[0].lineno <= line <= (region[-1].end_lineno or region[-1].lineno):
            return start
    return None


def rebinding_refusal(
    sources: Mapping[str, str], path: str, line: int, functions: Sequence[str], arg: str
) -> str | None:
    """Why ``arg = ...`` at ``line`` of ``path`` (a statement inside the functions named ``functions``,
    innermost first) cannot be rebound because a graph capture runs it, or None.

    ``sources`` holds the project's texts (``path`` among them). The caller decides first whether the
    rebinding outlives the call at all (a local name of a function does not: every later use of it
    is captured too, on the arrays the capture saw)."""
    start = capture_at(sources[path], line)
    if start is not None:
        capture = f"the graph captured at line {start}"
    else:
        captured = captured_functions(sources)
        hit = next((captured[f] for f in functions if f in captured), None)
        if hit is None:
            return None
        where, start = hit
        shown = os.path.relpath(where) if os.path.isabs(where) else where
        capture = f"{functions[0]}(), which the graph captured at {shown}:{start} runs,"
    return (
        f"{capture} cannot rebind {arg}: each replay of the graph reruns the captured "
        "launches on the arrays of the first run, not the rebinding (fix by hand: allocate the new "
        "buffer once, before the capture, and read it where the old one was read)"
    )


def captured_regions(tree: ast.AST) -> list[tuple[int, list[ast.stmt]]]:
    """(line of the capture, its statements): the body of each ``with ...ScopedCapture(...)``, and
    the statements between ``...capture_begin(...)`` and ``...capture_end(...)`` in one block."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
            isinstance(i.context_expr, ast.Call) and _name(i.context_expr.func) == "ScopedCapture" for i in node.items
        ):
            out.append((node.lineno, node.body))
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            begin: int | None = None
            for i, stmt in enumerate(block):
                called = {_name(c.func) for c in ast.walk(stmt) if isinstance(c, ast.Call)}
                if "capture_begin" in called and begin is None:
                    begin = i
                elif "capture_end" in called and begin is not None:
                    out.append((block[begin].lineno, block[begin + 1:i]))
                    begin = None
    return out


def _called(node: ast.AST) -> set[str]:
    return {name for c in ast.walk(node) if isinstance(c, ast.Call) and (name := _name(c.func))}


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None
