"""WF104: two buffers swapped in a loop on one tape (``a, b = b, a``).

Step N+1 writes the buffer step N read. The rewrite allocates a fresh output per step:
``b = wp.empty_like(b)`` just before the statement that writes ``b`` in the loop (a
``wp.launch`` with ``b`` in its ``outputs`` list, or a ``wp.copy(b, ...)``); the swap
stays, so the names still advance.

The span's line holds the swap, or the writing launch itself (for ``states[i % 2]``
style ping-pong: then ``states[(i + 1) % 2] = wp.empty_like(states[(i + 1) % 2])`` goes
before it).

Finding data (optional): ``written`` -- the name the loop writes into (default: the swapped
name that appears as a launch output or copy destination in the loop); ``arg`` -- with the
span on a launch, its output argument as written (default: its only output).
Skipped when the writing launch also reads the buffer, or when the write is not found.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand, call_name, keyword, positional

_PLACES = (cst.Name, cst.Attribute, cst.Subscript)


def _swap_places(node: cst.Assign) -> list[cst.BaseExpression] | None:
    if len(node.targets) != 1:
        return None
    target, value = node.targets[0].target, node.value
    if not (isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple)):
        return None
    left = [e.value for e in target.elements]
    right = [e.value for e in value.elements]
    if len(left) != 2 or len(right) != 2 or not all(isinstance(p, _PLACES) for p in left):
        return None
    if left[0].deep_equals(right[1]) and left[1].deep_equals(right[0]):
        return left
    return None


def _list_arg(call: cst.Call, name: str, index: int) -> list[cst.BaseExpression]:
    arg = keyword(call, name)
    if arg is None:
        args = positional(call)
        arg = args[index] if len(args) > index else None
    if arg is None or not isinstance(arg.value, (cst.List, cst.Tuple)):
        return []
    return [e.value for e in arg.value.elements]


class FreshOutput(FindingCommand):
    DESCRIPTION = "WF104: allocate a fresh output buffer each step instead of ping-ponging two buffers."
    RULES = ("WF104",)
    DATA = {
        "written": "the swapped name the loop writes into",
        "arg": "the launch's output argument to allocate fresh (when the span is the launch)",
    }

    def describe_missing(self) -> str:
        return "no two-buffer swap `a, b = b, a`"

    def plan(self, tree: cst.Module) -> None:
        swaps = [a for a in self.nodes(self.tree, cst.Assign) if self._covers(a) and _swap_places(a) is not None]
        if swaps:
            self._plan_swap(swaps[0])
            return
        call = self.on_line(cst.Call, lambda c: bool(_writes(c)[0]))
        wanted = self.data["arg"] or self.data["written"]
        outputs, inputs = _writes(call)
        hit = next((o for o in outputs if wanted is None or self.code(o) == wanted), None)
        if hit is None or (wanted is None and len(outputs) != 1):
            raise self.not_applicable("cannot tell which output of the launch is the ping-pong buffer")
        self._fresh_before(call, hit, inputs)

    def _plan_swap(self, swap: cst.Assign) -> None:
        loop = self.enclosing(swap, (cst.For, cst.While))
        if loop is None:
            raise self.not_applicable("the swap is not in a loop")
        places = _swap_places(swap)
        wanted = self.data["written"] or self.data["arg"]
        if wanted:
            places = [p for p in places if self.code(p) == wanted]
        for call in self.nodes(loop.body, cst.Call):
            outputs, inputs = _writes(call)
            hit = next((p for p in places if any(o.deep_equals(p) for o in outputs)), None)
            if hit is not None:
                self._fresh_before(call, hit, inputs)
                return
        raise self.not_applicable("no launch or copy in the loop writes a swapped buffer")

    def _fresh_before(self, call: cst.Call, hit: cst.BaseExpression, inputs: list[cst.BaseExpression]) -> None:
        if any(i.deep_equals(hit) for i in inputs):
            raise self.not_applicable(f"the launch at line {self.pos(call).start.line} also reads {self.code(hit)}")
        stmt = self.statement_of(call)
        self.check_rebindable(hit, stmt, through_return=True)
        text = self.code(hit)
        self.insert_before(stmt, [self.statement(f"{text} = {self.warp_alias()}.empty_like({text})\n")])


def _writes(call: cst.Call) -> tuple[list[cst.BaseExpression], list[cst.BaseExpression]]:
    """(outputs, inputs) of a launch, ([dest], []) of a copy, else ([], [])."""
    if call_name(call) == "launch":
        return _list_arg(call, "outputs", 3), _list_arg(call, "inputs", 2)
    if call_name(call) == "copy" and positional(call):
        return [positional(call)[0].value], []
    return [], []
