"""WF108: a zero-copy view (``wp.array(ptr=x.ptr, ...)``) of a taped array, written before backward.

The write through the view silently changes ``x`` under the tape. The rewrite makes the
view's allocation a copy instead, so the later write lands in the copy and ``x`` keeps its
values: ``view = wp.clone(x)`` when the view is all of ``x`` (``shape=x.shape, dtype=x.dtype``),
else a copy of the view itself, ``view = wp.clone(wp.array(ptr=x.ptr, ...))`` (same shape,
dtype and contents as the view, its own memory; ``wp.clone(x)`` would lose a reinterpreting
view's shape and dtype).

Finding data (optional): ``view`` -- the view's name; ``base`` -- the viewed array
(default: the ``X`` of ``ptr=X.ptr``). The span's line is the write through the view; the
view's allocation is the nearest earlier assignment to ``view`` in the same scope.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import dotted, keyword


def _viewed(call: cst.CSTNode) -> cst.BaseExpression | None:
    """``x`` when ``call`` is an array constructor given ``ptr=x.ptr``."""
    if not isinstance(call, cst.Call):
        return None
    ptr = keyword(call, "ptr")
    if ptr is None or not (isinstance(ptr.value, cst.Attribute) and ptr.value.attr.value == "ptr"):
        return None
    return ptr.value.value


class CloneView(FindingCommand):
    DESCRIPTION = "WF108: allocate a copy (wp.clone) instead of a zero-copy view that is written before backward."
    RULES = ("WF108",)
    DATA = {"view": "the view's name", "base": "the viewed array"}

    def describe_missing(self) -> str:
        return "no write through a view"

    def plan(self, tree: cst.Module) -> None:
        stmt = self.on_line(cst.SimpleStatementLine)
        scope = self.enclosing(stmt, cst.FunctionDef) or self.tree
        view = self.data["view"]
        allocations = [
            a
            for a in self.nodes(scope, cst.Assign)
            if self.pos(a).start.line < self.line
            and len(a.targets) == 1
            and (view is None or dotted(a.targets[0].target) == view)
            and _viewed(a.value) is not None
            and (view is not None or self._mentions(stmt, a.targets[0].target))
        ]
        if not allocations:
            raise self.not_applicable("no `view = wp.array(ptr=x.ptr, ...)` before the write")
        assign = allocations[-1]
        base = _viewed(assign.value)
        if self.data["base"] and self.data["base"] != self.code(base):
            raise self.not_applicable(f"the view is of {self.code(base)}, not {self.data['base']}")
        if self._same_layout(assign.value, base):
            self.replace(assign.value, self.expression(f"{self.warp_alias()}.clone({self.code(base)})"))
        else:  # a copy of the view itself: it often reinterprets (`vec3 x N` as `float x 3N`)
            self.replace(assign.value, self.expression(f"{self.warp_alias()}.clone({self.code(assign.value)})"))

    def _same_layout(self, call: cst.Call, base: cst.BaseExpression) -> bool:
        """Whether the view is ``wp.array(ptr=x.ptr, shape=x.shape, dtype=x.dtype[, device=...])``: all of ``x``."""
        wanted = {"ptr": "ptr", "shape": "shape", "dtype": "dtype"}
        given = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        if set(given) - {*wanted, "device"} or any(a.keyword is None for a in call.args):
            return False
        return all(
            k in given and isinstance(given[k], cst.Attribute) and given[k].attr.value == attr
            and given[k].value.deep_equals(base)
            for k, attr in wanted.items()
        )

    def _mentions(self, stmt: cst.CSTNode, target: cst.BaseExpression) -> bool:
        return any(n.deep_equals(target) for n in self.nodes(stmt, type(target)))
