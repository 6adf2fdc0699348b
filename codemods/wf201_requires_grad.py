"""WF201: add ``requires_grad=True`` to the allocation of a taped intermediate.

Finding data: none. The span points at the allocation call (``wp.zeros``, ``wp.empty``,
``wp.full``, ``wp.array``, ``wp.zeros_like``...); an explicit ``requires_grad=False`` is
turned into ``True``.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import add_keyword, is_warp_call

ALLOCATORS = ("zeros", "empty", "full", "ones", "array", "zeros_like", "empty_like", "full_like", "ones_like", "clone")


class RequireGrad(FindingCommand):
    DESCRIPTION = "WF201: allocate the intermediate with requires_grad=True."
    RULES = ("WF201",)

    def describe_missing(self) -> str:
        return "no array allocation"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, lambda c: is_warp_call(c, *ALLOCATORS))
        self.replace(call, lambda new: add_keyword(new, "requires_grad", cst.Name("True")))
