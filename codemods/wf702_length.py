"""WF702: ``wp.sqrt(wp.dot(v, v))`` (or ``wp.sqrt(wp.length_sq(v))``) -> ``wp.length(v)``; a sum of squares of
2 to 4 scalars, ``wp.sqrt(dx * dx + dy * dy)`` -> ``wp.length(wp.vector(dx, dy))``.

``wp.length`` has a guarded adjoint at the zero vector; the composed form divides by zero. ``wp.vector(...)``
takes its scalar type from its arguments, and Warp's ``length`` sums the squares in the same order, so the
forward values are the same (bit for bit on the CPU, float32 and float64, checked over a million random
triples). Finding data: none. The span points at the ``wp.sqrt`` call (the line is enough).
Other WF702 shapes (a bare ``wp.sqrt(x)``, division) have no mechanical fix: skipped.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name, is_warp_call, walk

_SIMPLE = (cst.Name, cst.Attribute, cst.Subscript)


def square_terms(node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """``[a, b]`` of ``a * a + b * b`` (2 to 4 squares of names, attributes or subscripts without calls)."""
    terms: list[cst.BaseExpression] = []
    todo = [node]
    while todo:
        e = todo.pop()
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add) and not e.lpar:
            todo += [e.right, e.left]
        elif (isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply) and not e.lpar
              and isinstance(e.left, _SIMPLE) and e.left.deep_equals(e.right)
              and not any(isinstance(n, cst.Call) for n in walk(e.left))):
            terms.append(e.left)
        else:
            return None
    return terms if 2 <= len(terms) <= 4 else None


def _length_operand(call: cst.Call) -> cst.BaseExpression | None:
    """``v`` when ``call`` is ``sqrt(dot(v, v))`` or ``sqrt(length_sq(v))``."""
    if not is_warp_call(call, "sqrt") or len(call.args) != 1:
        return None
    inner = call.args[0].value
    if isinstance(inner, cst.BinaryOperation):
        terms = square_terms(inner)
        return None if terms is None else cst.Call(cst.Name("vector"), [cst.Arg(t) for t in terms])
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
        return "no `wp.sqrt(wp.dot(v, v))` or `wp.sqrt(a * a + b * b)` here (only those forms have a mechanical fix)"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, lambda c: _length_operand(c) is not None)
        inner = call.args[0].value
        func = call.func  # `wp.sqrt` -> `wp.length`, the module as the program names it
        new_func = func.with_changes(attr=cst.Name("length")) if isinstance(func, cst.Attribute) else cst.Name("length")
        if isinstance(inner, cst.BinaryOperation):  # a sum of squares: the scalars make one vector
            terms = square_terms(inner)
            assert terms is not None
            vector = func.with_changes(attr=cst.Name("vector")) if isinstance(func, cst.Attribute) else cst.Name("vector")
            args = [cst.Arg(t, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for t in terms]
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            operand = cst.Arg(cst.Call(vector, args))
        else:
            assert isinstance(inner, cst.Call)
            operand = inner.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        self.replace(call, lambda new: new.with_changes(func=new_func, args=[operand]))
