"""WF501: drop ``arr.retain_grad = True`` / the ``retain_grad=True`` keyword of an allocation.

Finding data: none. The span's line holds the assignment or the call with the keyword.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import keyword, remove_keyword


def _is_retain_assign(node: cst.Assign) -> bool:
    return any(
        isinstance(t.target, cst.Attribute) and t.target.attr.value == "retain_grad" for t in node.targets
    )


class DropRetainGrad(FindingCommand):
    DESCRIPTION = "WF501: remove retain_grad, which double counts adjoints of multiply written arrays."
    RULES = ("WF501",)

    def describe_missing(self) -> str:
        return "no `retain_grad` here"

    def plan(self, tree: cst.Module) -> None:
        node = self.on_line(
            (cst.Assign, cst.Call),
            lambda n: _is_retain_assign(n) if isinstance(n, cst.Assign) else keyword(n, "retain_grad") is not None,
        )
        if isinstance(node, cst.Call):
            self.replace(node, lambda new: remove_keyword(new, "retain_grad"))
            return
        if len(node.targets) != 1:
            raise self.not_applicable("chained assignment to retain_grad")
        self.remove_small(node)
