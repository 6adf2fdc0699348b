"""WF601 hoist: the state lists a window loop carries across windows.

``states = [alloc for _ in range(K + 1)]`` carried by ``states[0] = states[-1]`` (or a swap, or
``wp.copy(states[0]..., states[-1]...)``) at the end of each window: found here, and grown to
``frames * K + 1`` distinct buffers with every ``states[i]`` in the loop re-indexed to the frame's
window (:class:`StateListHoist`, the base of :class:`codemods._hoist_carries.CarryHoist` and so of
:class:`codemods.wf601_hoist.HoistWindowTape`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name, positional, target_names


def _int_literal(node: cst.BaseExpression) -> int | None:
    """The value of ``3`` or ``-3``, else None."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(
        node.expression, cst.Integer
    ):
        return -int(node.expression.value)
    return None


def _single_index(sub: cst.Subscript) -> cst.BaseExpression | None:
    if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
        return sub.slice[0].slice.value
    return None


@dataclass
class StateList:
    name: str
    alloc: cst.Assign
    steps: str  # K: steps per window (the list holds K + 1 buffers)
    aliases: list[cst.BaseStatement] = field(default_factory=list)


class StateListHoist(FindingCommand):
    """Finding, checking and growing the carried state lists of a window loop."""

    def _state_lists(self, body: list[cst.BaseStatement], loop: cst.For, scope: cst.CSTNode) -> list[StateList]:
        """State lists carried across windows by an alias/copy of their last buffer into their first."""
        found: dict[str, StateList] = {}
        for stmt in body:
            name = self._alias_of(stmt)
            if name is None:
                continue
            if name not in found:
                alloc, steps = self._list_allocation(name, scope)
                found[name] = StateList(name, alloc, steps)
            found[name].aliases.append(stmt)
        for st in found.values():
            for node in self.nodes(loop.body, cst.Name):
                if node.value == st.name and not any(node in self.nodes(a, cst.Name) for a in st.aliases):
                    self._state_use(node, st)
        return list(found.values())

    def _alias_of(self, stmt: cst.BaseStatement) -> str | None:
        """``S`` when ``stmt`` is ``S[0] = S[-1]``, its swap, or ``wp.copy(S[0]..., S[-1]...)``."""
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target, value = small.targets[0].target, small.value
            if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == 2 == len(
                value.elements
            ):
                pairs = [(target.elements[0].value, value.elements[0].value), (target.elements[1].value,
                                                                                 value.elements[1].value)]
            else:
                pairs = [(target, value)]
        elif isinstance(small, cst.Expr) and call_name(small.value) == "copy" and isinstance(small.value, cst.Call):
            args = positional(small.value)
            if len(args) == 2 == len(small.value.args):
                pairs = [(args[0].value, args[1].value)]
        names = set()
        for dst, src in pairs:
            a, b = self._end_buffer(dst), self._end_buffer(src)
            if a is None or b is None or a[0] != b[0] or {a[1], b[1]} != {0, -1} or a[2] != b[2]:
                return None
            names.add(a[0])
        return names.pop() if len(names) == 1 else None

    def _end_buffer(self, node: cst.BaseExpression) -> tuple[str, int, str] | None:
        """(``S``, index, attribute path) for ``S[0].q`` / ``S[-1]``."""
        path = ""
        while isinstance(node, cst.Attribute):
            path = f".{node.attr.value}{path}"
            node = node.value
        if not isinstance(node, cst.Subscript) or not isinstance(node.value, cst.Name):
            return None
        index = _single_index(node)
        value = _int_literal(index) if index is not None else None
        return (node.value.value, value, path) if value in (0, -1) else None

    def _list_allocation(self, name: str, scope: cst.CSTNode) -> tuple[cst.Assign, str]:
        """The one ``name = [alloc for _ in range(K + 1)]`` of the state list (function, module or a caller)."""
        own = self._assignments(name, scope)
        if own:
            candidates = own
        elif isinstance(scope, cst.FunctionDef) and name in {p.name.value for p in scope.params.params}:
            candidates = [a for f in self.nodes(self.tree, cst.FunctionDef) if f is not scope
                          for a in self._assignments(name, f)] + self._assignments(name, self.tree, top=True)
        else:
            candidates = self._assignments(name, self.tree, top=True)
        if len(candidates) != 1:
            raise self.not_applicable(
                f"state list {name}: {len(candidates) or 'no'} allocation(s) in this file; "
                f"allocate frames * steps + 1 buffers by hand and index window f at f * steps"
            )
        alloc = candidates[0]
        comp = alloc.value
        if not (isinstance(comp, cst.ListComp) and isinstance(comp.for_in.iter, cst.Call)
                and call_name(comp.for_in.iter) == "range" and len(comp.for_in.iter.args) == 1
                and comp.for_in.inner_for_in is None and not comp.for_in.ifs):
            raise self.not_applicable(f"state list {name} is not allocated as `[... for _ in range(steps + 1)]`")
        length = comp.for_in.iter.args[0].value
        if isinstance(length, cst.BinaryOperation) and isinstance(length.operator, cst.Add) and self.code(
            length.right
        ) == "1":
            return alloc, self.code(length.left)
        return alloc, f"({self.code(length)} - 1)"

    def _assignments(self, name: str, scope: cst.CSTNode, *, top: bool = False) -> list[cst.Assign]:
        stmts = scope.body if top else self.nodes(scope, cst.Assign)
        if top:
            stmts = [s.body[0] for s in stmts if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1]
        return [a for a in stmts if isinstance(a, cst.Assign) and any(
            name in target_names(t.target) for t in a.targets)]

    def _state_use(self, node: cst.Name, st: StateList) -> None:
        parent = self.parent(node)
        if isinstance(parent, cst.Subscript) and parent.value is node and _single_index(parent) is not None:
            if isinstance(self.parent(self.parent(parent)), cst.AssignTarget):
                raise self.not_applicable(f"state list {st.name} is rebound item-wise at line {self.pos(node).start.line}")
            return
        if isinstance(parent, cst.Arg) and parent.value is node and parent.star == "":
            return
        raise self.not_applicable(
            f"state list {st.name} is used at line {self.pos(node).start.line} in a way the hoist cannot re-index"
        )

    def _grow_states(self, st: StateList, loop: cst.For, frame: str, frames: str) -> None:
        comp = st.alloc.value
        assert isinstance(comp, cst.ListComp) and isinstance(comp.for_in.iter, cst.Call)
        self.replace(comp.for_in.iter.args[0].value, self.expression(f"{frames} * {st.steps} + 1"))
        note = cst.EmptyLine(comment=cst.Comment(
            f"# warpfix WF601: one state per step of the whole episode ({st.steps} + 1 for one window before)"
        ))
        self.replace(self.statement_of(st.alloc), lambda new: new.with_changes(
            leading_lines=[*new.leading_lines, note]))
        for stmt in st.aliases:
            self.remove(stmt)
        k = st.steps
        for node in self.nodes(loop.body, cst.Name):
            if node.value != st.name or any(node in self.nodes(a, cst.Name) for a in st.aliases):
                continue
            parent = self.parent(node)
            if isinstance(parent, cst.Subscript) and parent.value is node:
                index = _single_index(parent)
                assert index is not None
                value = _int_literal(index)
                if value is not None and value < 0:
                    new = f"({frame} + 1) * {k}" + (f" - {-value - 1}" if value != -1 else "")
                elif value == 0:
                    new = f"{frame} * {k}"
                else:
                    simple = isinstance(index, (cst.Name, cst.Integer, cst.Attribute, cst.Subscript)) or (
                        isinstance(index, cst.BinaryOperation) and isinstance(index.operator, (cst.Add, cst.Subtract))
                        and not index.lpar
                    )
                    text = self.code(index) if simple or index.lpar else f"({self.code(index)})"
                    new = f"{frame} * {k} + {text}"
                self.replace(index, self.expression(new))
            else:
                self.replace(node, self.expression(f"{st.name}[{frame} * {k}:({frame} + 1) * {k} + 1]"))

    def _check_frames_reachable(self, states: list[StateList], scope: cst.CSTNode, frames: str) -> None:
        """A state list allocated outside the loop's function must see the frame count's names there too."""
        if not states or not isinstance(scope, cst.FunctionDef):
            return
        local = {p.name.value for p in scope.params.params}
        local |= {n for a in self.nodes(scope.body, cst.Assign) for t in a.targets for n in target_names(t.target)}
        needed = {n.value for n in self.nodes(self.expression(frames), cst.Name)}
        for st in states:
            if st.alloc not in self.nodes(scope, cst.Assign) and needed & local:
                raise self.not_applicable(
                    f"state list {st.name} is allocated outside {scope.name.value}(), where the frame count "
                    f"{frames} is not defined"
                )
