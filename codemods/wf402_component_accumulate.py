"""WF402: a component of a local vector/matrix/quaternion assigned with ``=`` again.

Only ``+=``/``-=`` after the first write keep gradients. The later write
``v[c] = expr`` (or ``v.x = expr``) becomes the accumulation ``v[c] += expr - v[c]``: the
same value, and an adjoint that flows to ``expr`` only (the old component's contributions
cancel). A reassignment inside a loop is skipped: backward does not replay dynamic loops,
so the accumulation would not be right there either.

Finding data (optional, checked when given): ``target`` -- the component as written
(``v[0]``). The span's line holds the later assignment. The unsafe alternative (the
``wp.config.enable_vector_component_overwrites`` flag) is not a codemod.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand

# Operators that bind at least as tightly as the binary minus: ``expr - v[c]`` needs no parentheses.
_TIGHT = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power, cst.MatrixMultiply)
_ATOMS = (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.Integer, cst.Float)


def _needs_parens(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, _ATOMS) or expr.lpar:
        return False
    if isinstance(expr, cst.BinaryOperation):
        return not isinstance(expr.operator, _TIGHT)
    if isinstance(expr, cst.UnaryOperation):
        return isinstance(expr.operator, cst.Not)
    return True


def _component_store(node: cst.Assign) -> bool:
    """``v[c] = ...`` or ``v.x = ...`` (``x``/``y``/``z``/``w``) on a local name."""
    if len(node.targets) != 1:
        return False
    target = node.targets[0].target
    if isinstance(target, cst.Attribute) and target.attr.value not in ("x", "y", "z", "w"):
        return False
    return isinstance(target, (cst.Subscript, cst.Attribute)) and isinstance(target.value, cst.Name)


class ComponentAccumulate(FindingCommand):
    DESCRIPTION = "WF402: turn a repeated component assignment into an accumulation."
    RULES = ("WF402",)
    DATA = {"target": "the component as written, e.g. v[0] or v.x"}

    def describe_missing(self) -> str:
        return "no `v[c] = ...` / `v.x = ...` component assignment"

    def plan(self, tree: cst.Module) -> None:
        assign = self.on_line(cst.Assign, _component_store)
        if self.enclosing(assign, (cst.For, cst.While)) is not None:
            # backward does not replay dynamic loops: an accumulation there is no fix either
            raise self.not_applicable("the component is reassigned inside a loop")
        target = assign.targets[0].target
        wanted = self.data["target"]
        if wanted and "".join(wanted.split()) != "".join(self.code(target).split()):
            raise self.not_applicable(f"the assignment writes {self.code(target)}, not {wanted}")
        value = assign.value
        if _needs_parens(value):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        space = cst.SimpleWhitespace(" ")
        new = cst.AugAssign(
            target=target,
            operator=cst.AddAssign(
                whitespace_before=assign.targets[0].whitespace_before_equal,
                whitespace_after=assign.targets[0].whitespace_after_equal,
            ),
            value=cst.BinaryOperation(
                left=value,
                operator=cst.Subtract(whitespace_before=space, whitespace_after=space),
                right=target,
            ),
            semicolon=assign.semicolon,
        )
        self.replace(assign, new)
