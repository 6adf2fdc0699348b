"""WF302 / WF303 / WF304: move a statement to the other side of ``tape.backward(...)``.

* WF302: work after the loss inside ``with tape:`` -> just after the backward that follows
  the ``with`` block;
* WF303: a write between the tape block and its backward -> just after the backward;
* WF304: a ``.grad`` read before the backward that produces it -> just after the backward;
  a ``.grad`` read after ``tape.zero()``/``tape.reset()`` -> just before it.

Statements keep their comments and, when several are moved, their order (findings are
applied bottom-up). Finding data (optional): ``tape`` -- the tape's expression text
(default: any ``<x>.backward(...)``). The span's line is the statement to move.

Skipped with a reason when the backward is not a statement of the same block (after the
``with``), or when moving would change what some statement in between reads (the moved
statement binds a name read before the backward, or reads one bound in between).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from codemods._base import FindingCommand, call_name


def _method_call(stmt: cst.CSTNode, *methods: str) -> cst.Call | None:
    """The call when ``stmt`` is a line ``<x>.<method>(...)`` alone."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call_name(call) in methods:
        return call
    return None


class MoveAcrossBackward(FindingCommand):
    DESCRIPTION = "WF302/WF303/WF304: move work after tape.backward(...) (or a .grad read before tape.zero())."
    RULES = ("WF302", "WF303", "WF304")
    DATA = {"tape": "the tape expression (`tape`, `self.tape`)"}

    def describe_missing(self) -> str:
        return "no statement"

    def _is_tape(self, call: cst.Call) -> bool:
        assert isinstance(call.func, cst.Attribute)
        wanted = self.data["tape"]
        return not wanted or self.code(call.func.value) == wanted

    def plan(self, tree: cst.Module) -> None:
        stmt = self.on_line(
            (cst.SimpleStatementLine, cst.BaseCompoundStatement), lambda s: self.pos(s).start.line == self.line
        )
        block = list(self.block_of(stmt))
        if not block:
            raise self.not_applicable("the statement is not in a block")
        container = self.parent(stmt)
        outer = None if isinstance(container, cst.Module) else self.parent(container)
        if isinstance(outer, cst.With) and stmt is not block[0]:
            # inside the tape block: the backward follows the `with` statement
            with_block = list(self.block_of(outer))
            anchor = self._backward_after(with_block, with_block.index(outer))
            if anchor is not None:
                between = block[block.index(stmt) + 1:] + with_block[with_block.index(outer) + 1: with_block.index(anchor)]
                self._move(stmt, anchor, [*between, anchor], after=True)
                return
        index = block.index(stmt)
        anchor = self._backward_after(block, index)
        if anchor is not None:
            self._move(stmt, anchor, block[index + 1: block.index(anchor) + 1], after=True)
            return
        if any(a.attr.value == "grad" for a in self.nodes(stmt, cst.Attribute)):
            zero = next(
                (
                    s
                    for s in reversed(block[:index])
                    if (c := _method_call(s, "zero", "reset")) is not None and self._is_tape(c)
                ),
                None,
            )
            if zero is not None:
                self._move(stmt, zero, block[block.index(zero): index], after=False)
                return
        raise self.not_applicable("no `tape.backward(...)` statement follows in the same block")

    def _backward_after(self, block: Sequence[cst.BaseStatement], index: int) -> cst.BaseStatement | None:
        for s in block[index + 1:]:
            call = _method_call(s, "backward")
            if call is not None and self._is_tape(call):
                return s
        return None

    def _move(
        self, stmt: cst.BaseStatement, anchor: cst.BaseStatement, crossed: Sequence[cst.BaseStatement], *, after: bool
    ) -> None:
        bound = _bound_names(stmt)
        for other in crossed:
            if bound & _read_names(other):
                raise self.not_applicable(
                    f"line {self.pos(other).start.line} reads {', '.join(sorted(bound & _read_names(other)))}"
                )
            if _bound_names(other) & _read_names(stmt):
                raise self.not_applicable(
                    f"line {self.pos(other).start.line} rebinds {', '.join(sorted(_bound_names(other) & _read_names(stmt)))}"
                )
        if after:
            self.move_after(stmt, anchor)
        else:
            self.move_before(stmt, anchor)


class _Names(cst.CSTVisitor):
    """Names a statement binds (assignment, ``as`` and loop targets) and names it reads."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.read: set[str] = set()
        self._targets: set[int] = set()

    def _bind(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.bound.add(target.value)
            self._targets.add(id(target))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bind(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self.bound.add(node.target.value)  # and read: the Name is visited as a read too

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind(node.name)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._targets:
            self.read.add(node.value)


def _names(stmt: cst.CSTNode) -> _Names:
    visitor = _Names()
    stmt.visit(visitor)
    return visitor


def _bound_names(stmt: cst.CSTNode) -> set[str]:
    return _names(stmt).bound


def _read_names(stmt: cst.CSTNode) -> set[str]:
    return _names(stmt).read
