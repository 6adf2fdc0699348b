"""WF702: ``wp.sqrt(wp.dot(v, v))`` (or ``wp.sqrt(wp.length_sq(v))``) -> ``wp.length(v)``.

``wp.length`` has a guarded adjoint at the zero vector; the composed form divides by zero.
Finding data: none. The span points at the ``wp.sqrt`` call (the line is enough).
Other WF702 shapes (a bare ``wp.sqrt(x)``, division) have no mechanical fix: skipped.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name, is_warp_call


def _length_operand(call: cst.Call) -> cst.BaseExpression | None:
    """``v`` when ``call`` is ``sqrt(dot(v, v))`` or ``sqrt(length_sq(v))``."""
    if not is_warp_call(call, "sqrt") or len(call.args) != 1:
        return None
    inner = call.args[0].value
    if not isinstance(inner, cst.Call) or any(a.keyword or a.star for a in inner.args):
        return None
    name = call_name(inner)
    if name == "length_sq" and len(inner.args) == 1:
        return inner.args[0].value
    if name == "dot" and len(inner.args) == 2 and inner.args[0].value.deep_equals(inner.args[1].value):
        return inner.args[0].value
    return None


class UseLength(FindingCommand):
    DESCRIPTION = "WF702: replace sqrt(dot(v, v)) by wp.length(v), whose adjoint is guarded at zero."
    RULES = ("WF702",)

    def describe_missing(self) -> str:
        return "no `wp.sqrt(wp.dot(v, v))` here (only that form has a mechanical fix)"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, lambda c: _length_operand(c) is not None)
        inner = call.args[0].value
        assert isinstance(inner, cst.Call)
        func = inner.func
        new_func = func.with_changes(attr=cst.Name("length")) if isinstance(func, cst.Attribute) else cst.Name("length")
        operand = inner.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        self.replace(call, lambda new: new.with_changes(func=new_func, args=[operand]))
