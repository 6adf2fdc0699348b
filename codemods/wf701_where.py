"""WF701: a ``wp.where``/``wp.select`` whose unselected operand can overflow.

Both operands of a select and both of their adjoints are evaluated, so an overflowing
unselected branch turns ``inf * 0`` into NaN in the gradient. Rewrites:

* the softplus guard ``wp.where(z > T, z, wp.log(1.0 + wp.exp(z)))`` (either operand
  order, ``wp.select`` too) -> ``wp.max(z, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(z)))``;
* any other select that is the whole right-hand side of an assignment or a ``return``
  -> a real ``if``/``else`` that evaluates only the taken branch.

Finding data: none. The span points at the ``wp.where``/``wp.select`` call.
Note ``wp.where(cond, if_true, if_false)`` but ``wp.select(cond, if_false, if_true)``.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name, is_warp_call


def _branches(call: cst.Call) -> tuple[cst.BaseExpression, cst.BaseExpression, cst.BaseExpression] | None:
    """(condition, value if true, value if false) of a where/select call."""
    if len(call.args) != 3 or any(a.keyword or a.star for a in call.args):
        return None
    cond, first, second = (a.value for a in call.args)
    if call_name(call) == "where":
        return cond, first, second
    return cond, second, first


def _is_one(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Float, cst.Integer)) and float(node.value) == 1.0


def _softplus_argument(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``z`` when ``node`` is ``log(1.0 + exp(z))`` (or ``log(exp(z) + 1.0)``)."""
    if not (is_warp_call(node, "log") and len(node.args) == 1):
        return None
    inner = node.args[0].value
    if not (isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Add)):
        return None
    for one, other in ((inner.left, inner.right), (inner.right, inner.left)):
        if _is_one(one) and is_warp_call(other, "exp") and len(other.args) == 1:
            return other.args[0].value
    return None


def _softplus_guard(call: cst.Call) -> cst.BaseExpression | None:
    parts = _branches(call)
    if parts is None:
        return None
    _cond, a, b = parts
    for plain, guarded in ((a, b), (b, a)):
        z = _softplus_argument(guarded)
        if z is not None and z.deep_equals(plain):
            return z
    return None


class SafeSelect(FindingCommand):
    DESCRIPTION = "WF701: replace an overflowing wp.where/wp.select by a stable form or a real if/else."
    RULES = ("WF701",)

    def describe_missing(self) -> str:
        return "no `wp.where(...)`/`wp.select(...)` call"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, lambda c: is_warp_call(c, "where", "select") and _branches(c) is not None)
        alias = self.code(call.func.value) + "." if isinstance(call.func, cst.Attribute) else ""
        z = _softplus_guard(call)
        if z is not None:
            self._stable_softplus(call, alias, self.code(z))
        else:
            self._if_else(call)

    def _stable_softplus(self, call: cst.Call, alias: str, z: str) -> None:
        text = f"{alias}max({z}, 0.0) + {alias}log(1.0 + {alias}exp(-{alias}abs({z})))"
        if isinstance(self.parent(call), cst.BaseExpression):
            text = f"({text})"
        self.replace(call, self.expression(text))

    def _if_else(self, call: cst.Call) -> None:
        owner = self.parent(call)
        line = self.parent(owner)
        if not (
            isinstance(owner, (cst.Assign, cst.AugAssign, cst.Return))
            and owner.value is call
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
        ):
            raise self.not_applicable("the select is not the whole value of an assignment or return")
        cond, if_true, if_false = _branches(call)
        head = self.code(owner.with_changes(value=cst.Name("__VALUE__"), semicolon=cst.MaybeSentinel.DEFAULT))
        indent = self.tree.default_indent
        source = (
            f"if {self.code(cond)}:\n{indent}{head.replace('__VALUE__', self.code(if_true))}\n"
            f"else:\n{indent}{head.replace('__VALUE__', self.code(if_false))}\n"
        )
        new = self.statement(source)
        assert isinstance(new, cst.If)
        new = new.with_changes(leading_lines=line.leading_lines, body=new.body.with_changes(header=line.trailing_whitespace))
        self.replace(line, new)
