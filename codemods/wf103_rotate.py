"""WF103: a rebinding that makes two live buffers of one tape the same object.

``states[0] = states[-1]`` -> ``states[0], states[-1] = states[-1], states[0]``: the
buffers rotate, so the next window writes a buffer distinct from the one it starts from.

Finding data: none. The span's line holds the aliasing assignment ``a = b`` where both
sides are names, attributes or subscripts (no calls).
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand

_PLACES = (cst.Name, cst.Attribute, cst.Subscript)


def _is_alias(node: cst.Assign) -> bool:
    return (
        len(node.targets) == 1
        and isinstance(node.targets[0].target, _PLACES)
        and isinstance(node.value, _PLACES)
    )


class RotateBuffers(FindingCommand):
    DESCRIPTION = "WF103: swap the two buffers instead of aliasing one to the other."
    RULES = ("WF103",)

    def describe_missing(self) -> str:
        return "no `a = b` rebinding between array places"

    def plan(self, tree: cst.Module) -> None:
        assign = self.on_line(cst.Assign, _is_alias)
        if any(self.nodes(assign, cst.Call)):
            raise self.not_applicable("the rebinding calls a function")
        target, value = self.code(assign.targets[0].target), self.code(assign.value)
        swap = self.statement(f"{target}, {value} = {value}, {target}\n")
        assert isinstance(swap, cst.SimpleStatementLine)
        self.replace(assign, swap.body[0].with_changes(semicolon=assign.semicolon))
