"""Which names a statement binds and reads, and whether it calls anything (the statement moves of
:mod:`codemods.wf302_after_backward` keep every use after its binding)."""

from __future__ import annotations

import libcst as cst

from codemods._cst import call_name, dotted


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
        elif isinstance(target, cst.Attribute) and (place := dotted(target)) is not None:
            self.bound.add(place)  # `self.g = ...`: readers of `self.g` depend on it
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

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if id(node) in self._targets:
            return False  # the target place itself; its base is not read either
        place = dotted(node)
        if place is not None:
            self.read.add(place)
        return True


def _names(stmt: cst.CSTNode) -> _Names:
    visitor = _Names()
    stmt.visit(visitor)
    return visitor


_EFFECTS = ("launch", "copy", "assign", "zero_", "fill_", "backward", "zero", "reset")


def effects(stmt: cst.CSTNode) -> bool:
    """Whether the statement records on a tape or mutates arrays (it must not move with a read)."""
    visitor = _Calls()
    stmt.visit(visitor)
    return bool(visitor.names & set(_EFFECTS))


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        name = call_name(node)
        if name:
            self.names.add(name)


def bound_names(stmt: cst.CSTNode) -> set[str]:
    return _names(stmt).bound


def read_names(stmt: cst.CSTNode) -> set[str]:
    return _names(stmt).read
