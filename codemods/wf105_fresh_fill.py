"""WF105: ``x.zero_()`` / ``x.fill_(v)`` on an array the tape already read.

The overwrite tracker does not see these writes, and the earlier reader's adjoint
replays against the new contents. The rewrite allocates a fresh array instead:
``x = wp.zeros_like(x)`` / ``x = wp.full_like(x, v)`` (both inherit ``requires_grad``).

Finding data: none. The span's line holds the ``zero_``/``fill_`` statement.
Skipped when ``x`` cannot be rebound (see WF101).
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand, call_name


def _is_reset(call: cst.Call) -> bool:
    name = call_name(call)
    return isinstance(call.func, cst.Attribute) and (
        (name == "zero_" and not call.args) or (name == "fill_" and len(call.args) == 1)
    )


class FreshFill(FindingCommand):
    DESCRIPTION = "WF105: allocate a fresh array instead of zero_()/fill_() on an array the tape read."
    RULES = ("WF105",)

    def describe_missing(self) -> str:
        return "no `x.zero_()` / `x.fill_(v)` statement"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, _is_reset)
        expr, line = self.parent(call), self.parent(self.parent(call))
        if not (isinstance(expr, cst.Expr) and isinstance(line, cst.SimpleStatementLine)):
            raise self.not_applicable("the reset is not a statement of its own")
        assert isinstance(call.func, cst.Attribute)
        target = call.func.value
        if isinstance(target, cst.Attribute) and target.attr.value == "grad":
            raise self.not_applicable("resetting a .grad is not a recorded write")
        self.check_rebindable(target, line, through_return=True)
        alias = self.warp_alias()
        text = self.code(target)
        if call_name(call) == "zero_":
            value = f"{alias}.zeros_like({text})"
        else:
            value = f"{alias}.full_like({text}, {self.code(call.args[0].value)})"
        self.replace(
            expr,
            cst.Assign(targets=[cst.AssignTarget(target)], value=self.expression(value), semicolon=expr.semicolon),
        )
