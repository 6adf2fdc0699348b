"""WF601 hoist: a window's own loss that the window also adds into a running total on the tape.

    for k in range(segments):                      tape = wp.Tape()
        tape = wp.Tape()                           with tape:
        with tape:                                     for k in range(segments):
            part = sim.segment_loss(k)        ->           part = sim.segment_loss(k)
            wp.launch(add, inputs=[part],                  wp.launch(add, inputs=[part], outputs=[total])
                      outputs=[total])             tape.backward(total)
        tape.backward(part)

Each window backwards its own ``part``, an array the program makes for it (not an allocation the hoist could
turn into a sum). A launch recorded in the same window that reads ``part`` and only adds into ``total``, an
array the loop neither allocates nor zeroes (:class:`codemods._hoist_loss.LossWalk`), already holds the sum of
every window's loss: the hoisted backward differentiates ``total``. Nothing the program computes changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from codemods._cst import call_name, list_arg
from codemods._hoist_loss import LossRefusal, LossWalk

if TYPE_CHECKING:
    from codemods.wf601_hoist import HoistWindowTape as Hoist


def running_total(cmd: Hoist, body: list[cst.BaseStatement], with_stmt: cst.With, loop: cst.For,
                  loss: str) -> str | None:
    """The array the window's recorded launches add ``loss`` into, when ``loss`` is bound in the loop by
    something other than an allocation and that array sums every window's loss; else None."""
    bound = [a for s in [*body, *with_stmt.body.body] if (a := cmd._assign(s)) is not None
             and cmd.code(a.targets[0].target) == loss]
    if not bound or any(call_name(a.value) in ("zeros", "empty") for a in bound):
        return None
    totals = []
    for call in cmd.nodes(with_stmt.body, cst.Call):
        if call_name(call) != "launch":
            continue
        inputs, outputs = list_arg(call, "inputs", 2), list_arg(call, "outputs", 3)
        if any(cmd.code(e) == loss for e in inputs) and len(outputs) == 1 and not cmd.nodes(outputs[0], cst.Call):
            totals.append(cmd.code(outputs[0]))
    if len(set(totals)) != 1:
        return None
    total = totals[0]
    filename = cmd.context.filename or "<module>"
    walk = LossWalk({**(cmd.context.scratch.get("sources") or {}), filename: cmd.tree.code})
    try:
        walk.check(filename, cmd.pos(loop).start.line, total)
    except LossRefusal:
        return None
    return total
