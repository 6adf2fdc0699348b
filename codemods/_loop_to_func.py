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

from codemods._imports import need_typing_any
from warpfix.model.loop_fix import NotExtractable, loop_signature

if TYPE_CHECKING:
    from codemods.wf403_static_bound import StaticLoopBound

__all__ = ["NotExtractable", "loop_into_func"]


def loop_into_func(cmd: StaticLoopBound, kernel: cst.FunctionDef, loop: cst.For) -> str:
    """Register the edits that move ``loop`` of ``kernel`` into a new ``@wp.func``; the report's summary.
    Raises :class:`NotExtractable` with the reason when the loop's shape does not allow it."""
    tree = ast.parse(cmd.tree.code)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.lineno == cmd.pos(kernel.name).start.line), None)  # fmt: skip
    at = cmd.pos(loop).start.line
    node = next((n for n in ast.walk(fn) if isinstance(n, ast.For) and n.lineno == at), None) if fn else None
    if fn is None or node is None:
        raise NotExtractable("the loop was not found in the kernel's syntax tree")
    inputs, outputs = loop_signature(tree, fn, node)
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
    need_typing_any(cmd)
    return (f"loop into a @{alias}.func: the loop at line {at} is now {name}(), which returns {returned}; the "
            "kernel's code after it uses the returned value, whose adjoint the function's backward computes")
