"""WF601 hoist: the buffers a window loop carries or overwrites from one window to the next.

Arrays the loop's launches write that are allocated once outside it (repeated at the top of every
window), the carries at the end of a window (``wp.copy(dst, src)``, ``dst.assign(src)``, the swap
``a, b = b, a``: each becomes a rebinding to the window's own buffer), and the carried state the
training loop around the window loop must allocate afresh every iteration (:class:`CarryHoist`,
a base of :class:`codemods.wf601_hoist.HoistWindowTape`).
"""

from __future__ import annotations

import libcst as cst

from codemods._cst import call_name, dotted, keyword, positional, target_names
from codemods._hoist_state_lists import StateList, StateListHoist

_ALLOCATORS = ("zeros", "empty", "ones", "full", "zeros_like", "empty_like", "ones_like", "full_like", "clone", "array")


def _is_swap(assign: cst.Assign) -> bool:
    """``a, b = b, a`` between plain names."""
    if len(assign.targets) != 1:
        return False
    target, value = assign.targets[0].target, assign.value
    if not (isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == 2 == len(
        value.elements
    )):
        return False
    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in (*target.elements, *value.elements)]
    return None not in names and names[0] != names[1] and names[2:] == names[1::-1]


class CarryHoist(StateListHoist):
    """Finding the per-window scratch arrays, the window-to-window carries and the initial state to repeat."""

    def _scratch_outputs(
        self, loop: cst.For, scope: cst.CSTNode, loss: str, states: list[StateList]
    ) -> list[cst.BaseStatement]:
        """Allocations to repeat at the top of each window: arrays the loop's launches write (``outputs=``)
        that are allocated once outside the loop."""
        bound = {n for a in self.nodes(loop.body, cst.Assign) if not _is_swap(a)
                 for t in a.targets for n in target_names(t.target)}
        bound |= {n for f in self.nodes(loop.body, cst.For) for n in target_names(f.target)}
        skip = bound | {loss} | {s.name for s in states}
        out: list[cst.BaseStatement] = []
        seen: set[str] = set()
        for launch in self.nodes(loop.body, cst.Call):
            outputs = keyword(launch, "outputs") if call_name(launch) == "launch" else None
            if outputs is None or not isinstance(outputs.value, (cst.List, cst.Tuple)):
                continue
            inputs = keyword(launch, "inputs")
            read = {self.code(n) for n in self.nodes(inputs.value, cst.Name)} if inputs is not None else set()
            for element in outputs.value.elements:
                target = element.value
                if not isinstance(target, cst.Name) or target.value in skip or target.value in seen:
                    continue
                if target.value in read:
                    raise self.not_applicable(
                        f"the launch at line {self.pos(launch).start.line} updates {target.value} in place"
                    )
                allocs = [a for a in self._assignments(target.value, scope, top=scope is self.tree) if not _is_swap(a)]
                if not allocs and scope is not self.tree:
                    allocs = self._assignments(target.value, self.tree, top=True)
                if len(allocs) != 1 or call_name(allocs[0].value) not in _ALLOCATORS:
                    raise self.not_applicable(
                        f"{target.value}, written in every window (line {self.pos(launch).start.line}), is not "
                        "allocated once by one wp.zeros/empty call: allocate it per window"
                    )
                seen.add(target.value)
                out.append(self.statement_of(allocs[0]))
        return out

    def _carries(
        self, body: list[cst.BaseStatement], with_stmt: cst.With, loop: cst.For, scope: cst.CSTNode,
        scratch: list[cst.BaseStatement],
    ) -> list[tuple[cst.BaseStatement, str]]:
        """Window-to-window carries between the tape's buffers, outside the ``with`` block: each becomes a
        rebinding (statement, new code), and ``scratch`` gains the allocations the rebinding needs.

        ``wp.copy(dst, src)`` / ``dst.assign(src)`` with ``src`` fresh every window -> ``dst = src``;
        the ping-pong swap ``a, b = b, a`` -> ``a = b`` with ``b`` allocated at the top of every window.
        """
        fresh = {n for a in self.nodes(loop.body, cst.Assign) if not _is_swap(a)
                 for t in a.targets for n in target_names(t.target)}
        fresh |= {n for stmt in scratch for a in self.nodes(stmt, cst.Assign) for t in a.targets
                  for n in target_names(t.target)}
        rest = {id(n) for s in self.block_of(loop)[list(self.block_of(loop)).index(loop) + 1 :]
                for n in self.nodes(s, cst.Name)}
        out: list[tuple[cst.BaseStatement, str]] = []
        for stmt in body[body.index(with_stmt) + 1 :]:
            if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
                continue
            small = stmt.body[0]
            pair = self._copy_pair(small)
            if pair is not None:
                dst, src = pair
                root = dotted(src).split(".")[0]  # type: ignore[union-attr]
                if root not in fresh:
                    raise self.not_applicable(
                        f"line {self.pos(stmt).start.line} copies {self.code(src)} into {self.code(dst)} for the "
                        f"next window, but {root} is not allocated per window: allocate it in the window loop and "
                        f"rebind {self.code(dst)} = {self.code(src)}"
                    )
                self.check_rebindable(dst, stmt, f"line {self.pos(stmt).start.line}")
                out.append((stmt, f"{self.code(dst)} = {self.code(src)}\n"))
                continue
            if not isinstance(small, cst.Assign) or not _is_swap(small):
                continue
            a, b = (e.value.value for e in small.targets[0].target.elements)  # type: ignore[attr-defined]
            allocs = [x for x in self._assignments(b, scope, top=scope is self.tree)
                      if x not in self.nodes(loop, cst.Assign) and not _is_swap(x)]
            if len(allocs) != 1 or call_name(allocs[0].value) is None:
                raise self.not_applicable(
                    f"the swap at line {self.pos(stmt).start.line} carries {a} into the next window through {b}, "
                    f"which is not allocated once by one call: allocate {b} per window and rebind {a} = {b}"
                )
            if any(n.value == b and id(n) in rest for n in self.nodes(scope, cst.Name)):
                raise self.not_applicable(f"{b} is read after the window loop: the swap at line "
                                          f"{self.pos(stmt).start.line} cannot become a rebinding")
            if b not in fresh:
                scratch.append(self.statement_of(allocs[0]))
            out.append((stmt, f"{a} = {b}\n"))
        return out

    def _copy_pair(self, small: cst.BaseSmallStatement) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        """(dst, src) of ``wp.copy(dst, src)`` / ``dst.assign(src)`` between plain names or attributes."""
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return None
        call = small.value
        if call_name(call) == "copy" and len(call.args) == 2 == len(positional(call)):
            dst, src = call.args[0].value, call.args[1].value
        elif call_name(call) == "assign" and isinstance(call.func, cst.Attribute) and len(call.args) == 1:
            dst, src = call.func.value, call.args[0].value
        else:
            return None
        return (dst, src) if dotted(dst) is not None and dotted(src) is not None else None

    def _initial_state(
        self, loop: cst.For, scope: cst.CSTNode, states: list[StateList]
    ) -> tuple[cst.For | cst.While, list[cst.BaseStatement]] | None:
        """The training loop around the window loop and the allocations of carried state it must repeat so
        that every iteration starts from a fresh state: names the window loop rebinds whose only binding
        is one ``name = <call>`` before the training loop."""
        outer = next((a for a in self.ancestors(loop) if isinstance(a, (cst.For, cst.While, cst.FunctionDef))), None)
        if not isinstance(outer, (cst.For, cst.While)) or not isinstance(outer.body, cst.IndentedBlock):
            return None
        carried = self.data["carried"] or []
        if isinstance(carried, str):
            carried = carried.split(",")
        roots = {label.strip().split(".")[0].split("[")[0] for label in carried} - {s.name for s in states}
        rebound = {n for a in self.nodes(loop.body, cst.Assign) for t in a.targets for n in target_names(t.target)}
        inner = {id(a) for a in self.nodes(loop.body, cst.Assign)}
        in_outer = {n for a in self.nodes(outer.body, cst.Assign) if id(a) not in inner
                    for t in a.targets for n in target_names(t.target)}
        within = {id(a) for a in self.nodes(outer, cst.Assign)}
        allocs: list[cst.BaseStatement] = []
        for root in sorted(roots & rebound - in_outer):
            found = [a for a in self._assignments(root, scope, top=scope is self.tree) if id(a) not in within]
            if len(found) == 1 and isinstance(found[0].value, cst.Call):
                stmt = self.statement_of(found[0])
                if stmt not in allocs and self.enclosing(stmt, (cst.For, cst.While)) is self.enclosing(outer, (
                        cst.For, cst.While)):
                    allocs.append(stmt)
        return (outer, allocs) if allocs else None
