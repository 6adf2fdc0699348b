"""WF601 hoist: the tape a window makes through a project context manager, and a backward seeded with ``grads=``.

    @contextlib.contextmanager                     with recording() as tape:
    def recording():                                   for w in range(WINDOWS):
        tape = wp.Tape()                                   simulate_window(w)
        with tape:                            ->   tape.backward(grads={err: seed})
            yield tape

    for w in range(WINDOWS):
        with recording() as tape:
            simulate_window(w)
        tape.backward(grads={err: seed})

``recording()`` makes a new tape and records the block on it, like ``with wp.Tape() as tape:``: the hoisted loop
runs inside one such block. A backward seeded with ``grads={err: seed}`` differentiates ``seed . err``; when every
window only adds into ``err`` (the loop does not reset it), ``err`` after the loop holds the whole episode's terms,
and the same seeded backward after the loop differentiates the episode's objective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from codemods._cst import call_name, keyword

if TYPE_CHECKING:
    from codemods.wf601_hoist import HoistWindowTape


def _yields_new_tape(func: cst.FunctionDef) -> bool:
    """``tape = wp.Tape()`` then ``with tape: yield tape`` (or ``with wp.Tape() as tape: yield tape``), and
    nothing else records or yields."""
    body = list(func.body.body) if isinstance(func.body, cst.IndentedBlock) else []
    made: set[str] = set()
    for stmt in body:
        if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)
                and call_name(stmt.body[0].value) == "Tape" and isinstance(stmt.body[0].targets[0].target, cst.Name)):
            made.add(stmt.body[0].targets[0].target.value)
        elif isinstance(stmt, cst.With) and len(stmt.items) == 1 and isinstance(stmt.body, cst.IndentedBlock):
            item = stmt.items[0]
            name = item.asname.name.value if item.asname is not None and isinstance(item.asname.name, cst.Name) else (
                item.item.value if isinstance(item.item, cst.Name) else None)
            new = call_name(item.item) == "Tape" and item.asname is not None
            inner = list(stmt.body.body)
            if name is not None and (new or name in made) and len(inner) == 1 and isinstance(
                    inner[0], cst.SimpleStatementLine) and len(inner[0].body) == 1 and isinstance(
                    inner[0].body[0], cst.Expr) and isinstance(inner[0].body[0].value, cst.Yield):
                value = inner[0].body[0].value.value
                return isinstance(value, cst.Name) and value.value == name
            return False
        elif not isinstance(stmt, cst.SimpleStatementLine) or not all(
                isinstance(s, (cst.Expr,)) and isinstance(s.value, cst.SimpleString) for s in stmt.body):
            return False  # anything but a docstring
    return False


def context_made_tape(cmd: HoistWindowTape, item: cst.WithItem) -> bool:
    """Whether ``with <item> as tape:`` calls a module-level ``@contextmanager`` function of this file that
    yields a new tape it records on."""
    if not isinstance(item.item, cst.Call) or not isinstance(item.item.func, cst.Name) or item.item.args:
        return False
    for func in cmd.tree.body:
        if isinstance(func, cst.FunctionDef) and func.name.value == item.item.func.value:
            decorated = any((cmd.code(d.decorator).rpartition(".")[2]) == "contextmanager" for d in func.decorators)
            return decorated and _yields_new_tape(func)
    return False


def seeded_loss(cmd: HoistWindowTape, call: cst.Call) -> tuple[str, str] | None:
    """(array, seed) of ``tape.backward(grads={array: seed})`` with one seeded array named without calls; else
    None."""
    arg = keyword(call, "grads")
    if arg is None or len(call.args) != 1 or not isinstance(arg.value, cst.Dict) or len(arg.value.elements) != 1:
        return None
    element = arg.value.elements[0]
    if not isinstance(element, cst.DictElement) or not isinstance(element.key, (cst.Name, cst.Attribute, cst.Subscript)):
        return None
    if cmd.nodes(element.key, cst.Call) or cmd.nodes(element.value, cst.Call):
        return None
    return cmd.code(element.key), cmd.code(element.value)
