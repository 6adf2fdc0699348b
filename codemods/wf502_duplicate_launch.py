"""WF502: delete a launch recorded twice in a row on one tape (the repeat, at the span).

Finding data: none. The span's line holds the repeated ``wp.launch(...)`` statement;
the statement before it in the same block must be the identical launch.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import is_warp_call


def _launch_line(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and is_warp_call(stmt.body[0].value, "launch")
    )


class DeleteDuplicateLaunch(FindingCommand):
    DESCRIPTION = "WF502: delete a repeated launch that records the same kernel twice."
    RULES = ("WF502",)

    def describe_missing(self) -> str:
        return "no `wp.launch(...)` statement"

    def plan(self, tree: cst.Module) -> None:
        stmt = self.on_line(cst.SimpleStatementLine, _launch_line)
        block = list(self.block_of(stmt))
        index = block.index(stmt)
        earlier = [s for s in block[:index] if _launch_line(s)]
        call = stmt.body[0].value
        if not earlier or not earlier[-1].body[0].value.deep_equals(call):
            raise self.not_applicable("no identical launch before it in the same block")
        self.remove(stmt)
