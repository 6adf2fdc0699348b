"""WF301: gradients summed over optimizer iterations for want of ``tape.zero()``.

The rewrite inserts ``<tape>.zero()`` as the last statement of the innermost loop around
the backward at the span (before a trailing ``continue``/``break``), i.e. after the
iteration has consumed the gradient. With ``arrays`` given, it instead zeroes those
arrays' gradients just before the backward (``x.grad.zero_()``): the form for a tape that
is fresh each iteration while persistent arrays keep their ``.grad``.

Finding data (optional): ``tape`` -- the tape expression (default: the object whose
``.backward`` is called at the span); ``arrays`` -- list (or comma-separated text) of
array expressions whose ``.grad`` to zero before the backward.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand, call_name


class ZeroTape(FindingCommand):
    DESCRIPTION = "WF301: zero the tape's gradients once per optimizer iteration."
    RULES = ("WF301",)
    DATA = {"tape": "the tape expression", "arrays": "arrays whose .grad to zero before the backward"}

    def describe_missing(self) -> str:
        return "no `tape.backward(...)` call"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, lambda c: call_name(c) == "backward" and isinstance(c.func, cst.Attribute))
        assert isinstance(call.func, cst.Attribute)
        tape = self.data["tape"] or self.code(call.func.value)
        stmt = self.statement_of(call)
        arrays = self.data["arrays"]
        if isinstance(arrays, str):
            arrays = [a.strip() for a in arrays.split(",") if a.strip()]
        if arrays:
            self.insert_before(stmt, [self.statement(f"{a}.grad.zero_()\n") for a in arrays])
            return
        loop = self.enclosing(call, (cst.For, cst.While))
        if loop is None or not isinstance(loop.body, cst.IndentedBlock):
            raise self.not_applicable("the backward is not in a loop")
        body = list(loop.body.body)
        if any(self._zeroes(s, tape) for s in body):
            raise self.not_applicable(f"the loop already calls {tape}.zero()")
        zero = self.statement(f"{tape}.zero()\n")
        last = body[-1]
        if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], (cst.Continue, cst.Break)):
            self.insert_before(last, [zero])
        else:
            self.insert_after(last, [zero])

    def _zeroes(self, stmt: cst.BaseStatement, tape: str) -> bool:
        return any(
            call_name(c) in ("zero", "reset") and isinstance(c.func, cst.Attribute) and self.code(c.func.value) == tape
            for c in self.nodes(stmt, cst.Call)
        )
