"""WF101: a recorded copy writes back onto an array the tape already read.

``wp.copy(dst, src)`` / ``dst.assign(src)`` -> ``dst = src``: later readers of ``dst`` see
the same values, and no recorded op overwrites what an earlier op read.

Finding data (optional, checked when given): ``dst`` and ``src`` -- the expression texts
of the two arguments as written. The span's line holds the copy statement.

Skipped with a reason when not mechanical: the copy is part of a larger expression,
copies a sub-range (``dest_offset``/``src_offset``/``count``), or ``dst`` cannot be
rebound (a call, or a parameter of the enclosing function whose caller would not see it).
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand, call_name, positional


def _copy_operands(call: cst.Call) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(dst, src) of ``wp.copy(dst, src)`` or ``dst.assign(src)`` with no other arguments."""
    if call_name(call) == "copy":
        args = positional(call)
        named = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        if len(args) == 2 and not named:
            return args[0].value, args[1].value
        if set(named) == {"dest", "src"} and not args:
            return named["dest"], named["src"]
        return None
    if call_name(call) == "assign" and isinstance(call.func, cst.Attribute) and len(call.args) == 1:
        arg = call.args[0]
        if arg.keyword is None or arg.keyword.value in ("src", "value"):
            return call.func.value, arg.value
    return None


class CopyToRebind(FindingCommand):
    DESCRIPTION = "WF101: replace a write-back copy by rebinding the name to the source array."
    RULES = ("WF101",)
    DATA = {"dst": "the copy's destination as written", "src": "the copy's source as written"}

    def describe_missing(self) -> str:
        return "no whole-array `wp.copy(dst, src)` / `dst.assign(src)` statement"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, lambda c: _copy_operands(c) is not None)
        dst, src = _copy_operands(call)
        for key, node in (("dst", dst), ("src", src)):
            wanted = self.data[key]
            if wanted and "".join(wanted.split()) != "".join(self.code(node).split()):
                raise self.not_applicable(f"the copy's {key} is {self.code(node)}, not {wanted}")
        line = self.parent(self.parent(call))
        if not (isinstance(self.parent(call), cst.Expr) and isinstance(line, cst.SimpleStatementLine)):
            raise self.not_applicable("the copy is not a statement of its own")
        self.check_rebindable(dst, line)
        expr = self.parent(call)
        self.replace(expr, cst.Assign(targets=[cst.AssignTarget(dst)], value=src, semicolon=expr.semicolon))
