"""WF801: ``wp.adjoint[x] = ...`` inside ``@wp.func_grad`` -> ``wp.adjoint[x] += ...``.

Finding data: none. The span's line holds the assignment.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import dotted


def _is_adjoint_store(node: cst.Assign) -> bool:
    if len(node.targets) != 1:
        return False
    target = node.targets[0].target
    return isinstance(target, cst.Subscript) and (dotted(target.value) or "").split(".")[-1] == "adjoint"


class AdjointAccumulate(FindingCommand):
    DESCRIPTION = "WF801: accumulate into wp.adjoint[...] instead of assigning."
    RULES = ("WF801",)

    def describe_missing(self) -> str:
        return "no `wp.adjoint[...] = ...` assignment"

    def plan(self, tree: cst.Module) -> None:
        assign = self.on_line(cst.Assign, _is_adjoint_store)
        target = assign.targets[0]
        self.replace(
            assign,
            lambda new: cst.AugAssign(
                target=new.targets[0].target,
                operator=cst.AddAssign(
                    whitespace_before=target.whitespace_before_equal,
                    whitespace_after=target.whitespace_after_equal,
                ),
                value=new.value,
                semicolon=new.semicolon,
            ),
        )
