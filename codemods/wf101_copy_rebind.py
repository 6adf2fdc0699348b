"""WF101: a recorded copy writes back onto an array the tape already read.

Two strategies (the report names the one used); both keep every value later readers of
``dst`` see, and no recorded op overwrites what an earlier op read:

* **rebinding** ``dst = src`` when ``src`` is a name bound by a call (an allocation) earlier in
  the same iteration (the innermost loop around the copy, else its function);
* **a fresh buffer per step** ``dst = wp.clone(src)`` otherwise: a long-lived ``src`` (a list
  element ``self.vd[t]``, a buffer reused every step) would be aliased by a rebinding, and the
  next iteration would write through the alias (``self.v[t + 1] = self.vd[t]`` is right once
  and wrong from the second iteration).

Finding data (optional, checked when given): ``dst`` and ``src`` -- the expression texts
of the two arguments as written. The span's line holds the copy statement.

Skipped with a reason when not mechanical: the copy is part of a larger expression,
copies a sub-range (``dest_offset``/``src_offset``/``count``), or ``dst`` cannot be
rebound (a call, or a parameter of the enclosing function whose caller would not see it).
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name, positional, target_names


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
        self.check_rebindable(dst, line, through_return=True)
        expr = self.parent(call)
        if self._fresh(src, line):
            value, what = src, f"rebinding: {self.code(dst)} = {self.code(src)}"
        else:
            value = self.expression(f"{self.warp_alias()}.clone({self.code(src)})")
            what = (f"a fresh buffer per step: {self.code(dst)} = {self.warp_alias()}.clone(...), as "
                    f"{self.code(src)} is not allocated afresh where the copy runs (a rebinding would alias it)")
        self.replace(expr, cst.Assign(targets=[cst.AssignTarget(dst)], value=value, semicolon=expr.semicolon))
        self.context.scratch["summary"] = what

    def _fresh(self, src: cst.BaseExpression, line: cst.BaseStatement) -> bool:
        """Whether ``src`` is a name bound by a call (an allocation, a launch helper's result) earlier in the
        same iteration: the innermost loop around the copy, else its function (or module)."""
        if not isinstance(src, cst.Name):
            return False
        scope: cst.CSTNode = self.tree
        for node in self.ancestors(line):
            if isinstance(node, (cst.For, cst.While, cst.FunctionDef)):
                scope = node.body
                break
        stop = self.pos(line).start.line
        binds = [a for a in self.nodes(scope, cst.Assign) if self.pos(a).start.line < stop
                 and any(src.value in target_names(t.target) for t in a.targets)]
        return bool(binds) and isinstance(binds[-1].value, cst.Call)
