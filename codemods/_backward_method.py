"""WF302 where the backward runs in another method of the class than the tape block.

A trainer records in ``forward()`` (``with self.tape: ...``) and runs ``self.tape.backward(...)`` in
``backward()``; its loop calls one then the other (``self.forward()`` / ``self.backward()`` in a method of
the class, or ``trainer.forward()`` / ``trainer.backward()`` on an instance the file makes). Work left in
the tape block after the loss (an optimizer step) then goes just after each such call of ``backward()``,
``self`` renamed to the instance the loop calls it on.

:class:`BackwardMethod` (a base of :class:`codemods.wf302_after_backward.MoveAcrossBackward`) finds the
places and the statements the move crosses; it refuses, with the reason, unless

* the ``with`` block is a statement of the method's body (it runs once per call), the method returns only
  at its end, after the block;
* exactly one other method of the class runs ``<tape>.backward(...)``, as a statement of its body;
* every use of the recording method in the file is a call statement on ``self`` (in another method of the
  class) or on an instance of the class, followed in the same block by a call of the backward's method on
  the same object (so the moved work runs exactly as often as before, now after a backward).

Which of the crossed statements may be crossed is for the caller to judge (names bound and read, effects).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from codemods._cst import method_call
from codemods._zero_callers import CallerZero

NO_BACKWARD = "no `tape.backward(...)` statement follows in the same block"
# calls that only read what they are handed: crossing one cannot change what the moved work sees
_READ_ONLY = frozenset({"print", "len", "float", "int", "str", "repr", "format", "bool"})
_READ_ONLY_METHODS = frozenset({"numpy", "item", "tolist"})


@dataclass
class CallSite:
    """A call of the backward's method after a call of the recording method, in one block."""

    anchor: cst.BaseStatement  # the statement calling the backward's method
    receiver: str  # `self`, or the instance's name
    between: list[cst.BaseStatement]  # the statements between the two calls


@dataclass
class BackwardElsewhere:
    backward: cst.FunctionDef  # the method running the backward
    sites: list[CallSite]
    crossed: list[cst.BaseStatement]  # what the moved work crosses, besides the sites' `between`


class BackwardMethod(CallerZero):
    """Where work of a tape block goes when the backward is another method's, called after it."""

    def _backward_elsewhere(self, stmt: cst.BaseStatement, block: cst.With, tape: str) -> BackwardElsewhere:
        method = self.enclosing(block, cst.FunctionDef)
        cls = self.enclosing(method, cst.ClassDef) if method is not None else None
        if method is None or cls is None or not tape.startswith("self.") or method not in cls.body.body:
            raise self.not_applicable(f"{NO_BACKWARD}, and the tape block is not in a method recording a self.<tape>")
        body = list(method.body.body)
        name = method.name.value
        if block not in body:
            raise self.not_applicable(f"{NO_BACKWARD}, and the tape block is nested in {name}() (it may not run)")
        returns = [r for r in self.nodes(method, cst.Return) if self.enclosing(r, cst.FunctionDef) is method]
        if any(self.statement_of(r) is not body[-1] for r in returns):
            raise self.not_applicable(f"{NO_BACKWARD}, and {name}() may return before its end")
        backs = [m for m in cls.body.body if isinstance(m, cst.FunctionDef) and m is not method and any(
            (c := method_call(s, "backward")) is not None and self.code(c.func.value) == tape for s in m.body.body)]
        if len(backs) != 1:
            raise self.not_applicable(f"{NO_BACKWARD}, and {len(backs)} other method(s) of {cls.name.value} run "
                                      f"{tape}.backward(...) as a statement")
        backward = backs[0]
        rest = list(block.body.body)
        crossed = rest[rest.index(stmt) + 1:] + body[body.index(block) + 1:] + [
            s for s in backward.body.body if (c := method_call(s, "backward")) is None or self.code(c.func.value) != tape]
        return BackwardElsewhere(backward, self._call_sites(cls, method, backward), crossed)

    def _call_sites(self, cls: cst.ClassDef, method: cst.FunctionDef, backward: cst.FunctionDef) -> list[CallSite]:
        name, back = method.name.value, backward.name.value
        instances = self._instances(cls)
        sites = []
        for node in self.nodes(self.tree, cst.Attribute):
            if node.attr.value != name:
                continue
            call = self.parent(node)
            line = self.pos(node).start.line
            if not isinstance(call, cst.Call) or call.func is not node:
                raise self.not_applicable(f"{NO_BACKWARD}, and {name} is used at line {line} other than by a call")
            receiver = self.code(node.value)
            caller = self.enclosing(call, cst.FunctionDef)
            own = receiver == "self" and caller is not None and caller in cls.body.body and caller not in (
                method, backward)
            if not own and receiver not in instances:
                raise self.not_applicable(f"{NO_BACKWARD}, and {name}() is called at line {line} on {receiver}, not on self or an "
                                          f"instance of {cls.name.value} made in this file")
            stmt = self.statement_of(call)
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            if not (isinstance(small, cst.Expr) or isinstance(small, cst.Assign) and small.value is call):
                raise self.not_applicable(f"{NO_BACKWARD}, and the call of {name}() at line {line} is not a statement of its own")
            block = list(self.block_of(stmt))
            after = block[block.index(stmt) + 1:]
            anchor = next((s for s in after if (c := method_call(s, back)) is not None
                           and self.code(c.func.value) == receiver), None)
            if anchor is None:
                raise self.not_applicable(f"{NO_BACKWARD}, and the call of {name}() at line {line} is not followed by {receiver}.{back}() "
                                          "in the same block")
            sites.append(CallSite(anchor, receiver, after[: after.index(anchor)]))
        if not sites:
            raise self.not_applicable(f"{NO_BACKWARD}, and {name}() is not called in this file")
        return sites

    def _only_reads(self, stmt: cst.CSTNode) -> bool:
        """Every call of ``stmt`` is a builtin that reads (``print``) or ``.numpy()``/``.item()``."""
        return all(
            isinstance(c.func, cst.Name) and c.func.value in _READ_ONLY
            or isinstance(c.func, cst.Attribute) and c.func.attr.value in _READ_ONLY_METHODS
            for c in self.nodes(stmt, cst.Call)
        )


class _Rename(cst.CSTTransformer):
    """``self`` -> the instance the caller holds."""

    def __init__(self, receiver: str) -> None:
        self.receiver = receiver

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value=self.receiver) if updated_node.value == "self" else updated_node


def as_called_on(stmt: cst.BaseStatement, receiver: str) -> cst.BaseStatement:
    """``stmt`` of a method, written where the method is called on ``receiver``."""
    if receiver == "self":
        return stmt
    renamed = stmt.visit(_Rename(receiver))
    assert isinstance(renamed, cst.BaseStatement)
    return renamed
