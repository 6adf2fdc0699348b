"""WF104: two buffers swapped in a loop on one tape (``a, b = b, a``).

Step N+1 writes the buffer step N read. The rewrite allocates a fresh output per step:
``b = wp.empty_like(b)`` just before the statement that writes ``b`` in the loop (a
``wp.launch`` with ``b`` in its ``outputs`` list, or a ``wp.copy(b, ...)``); the swap
stays, so the names still advance.

Finding data (optional): ``written`` -- the name the loop writes into (default: the swapped
name that appears as a launch output or copy destination in the loop).
The span's line holds the swap. Skipped when the writing launch also reads the buffer,
or when the write is not found in the loop.
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
    DATA = {"written": "the swapped name the loop writes into"}

    def describe_missing(self) -> str:
        return "no two-buffer swap `a, b = b, a`"

    def plan(self, tree: cst.Module) -> None:
        swap = self.on_line(cst.Assign, lambda a: _swap_places(a) is not None)
        loop = self.enclosing(swap, (cst.For, cst.While))
        if loop is None:
            raise self.not_applicable("the swap is not in a loop")
        places = _swap_places(swap)
        wanted = self.data["written"]
        if wanted:
            places = [p for p in places if self.code(p) == wanted]
        for call in self.nodes(loop.body, cst.Call):
            if call_name(call) == "launch":
                outputs = _list_arg(call, "outputs", 3)
                inputs = _list_arg(call, "inputs", 2)
            elif call_name(call) == "copy" and positional(call):
                outputs, inputs = [positional(call)[0].value], []
            else:
                continue
            hit = next((p for p in places if any(o.deep_equals(p) for o in outputs)), None)
            if hit is None:
                continue
            if any(i.deep_equals(hit) for i in inputs):
                raise self.not_applicable(f"the launch at line {self.pos(call).start.line} also reads {self.code(hit)}")
            stmt = self.statement_of(call)
            text = self.code(hit)
            self.insert_before(stmt, [self.statement(f"{text} = {self.warp_alias()}.empty_like({text})\n")])
            return
        raise self.not_applicable("no launch or copy in the loop writes a swapped buffer")
