"""WF601 mutation operators: the tape moved into the frame loop.

A user who puts the tape inside the loop over frames (or windows) writes one of two shapes:

- ``per-frame-tape`` (truncation): a new tape per frame and the one backward after the loop, so
  the backward replays only the last frame's recording (and whatever follows the loop);
- ``per-window-backward``: a new tape and a backward per frame, the parameters' gradients summed
  across frames (no zero in between), each frame's start state a constant to its backward.

Sites: a ``with <tape>:`` block whose body holds the frame loop, either directly or through one
call ``self.m(args)`` of a method of the same class (args named as its parameters), which is then
inlined. The statements before the loop are recorded on the original tape, those after it on the
last frame's tape. ``per-window-backward`` needs the backward's seed to be written inside the loop
(nothing but a ``return`` after it): otherwise a per-frame backward would need a new per-frame
objective, a forward change.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m

from bench.mutants.operators import (
    Mutant,
    Operator,
    SiteTransformer,
    TapedScope,
    _backward_of,
    _single_expr,
    code_of,
    is_tape_with,
)


def _tape_name(block: cst.With) -> str | None:
    """The expression a ``with`` block records on: ``self.tape`` / ``tape``, or ``t`` of ``with wp.Tape() as t``."""
    if len(block.items) != 1:
        return None
    item = block.items[0]
    if item.asname is not None:
        return code_of(item.asname.name)
    return None if isinstance(item.item, cst.Call) else code_of(item.item)


def _split(body: Sequence[cst.BaseStatement]) -> tuple[list, cst.For, list] | None:
    """(before, loop, after) around the first top-level ``for``; a trailing ``return`` dropped."""
    index = next((i for i, s in enumerate(body) if isinstance(s, cst.For)), None)
    if index is None:
        return None
    loop = body[index]
    assert isinstance(loop, cst.For)
    after = list(body[index + 1:])
    if after and isinstance(after[-1], cst.SimpleStatementLine) and isinstance(after[-1].body[-1], cst.Return):
        after = after[:-1]
    if loop.orelse is not None or any(m.findall(s, m.Return()) for s in [loop, *body[:index], *after]):
        return None
    if m.findall(loop.body, m.Break()):
        return None
    before = list(body[:index])
    if before and m.matches(before[0], m.SimpleStatementLine(body=[m.Expr(m.SimpleString() | m.ConcatenatedString())])):
        before = before[1:]  # a docstring of the inlined method
    return before, loop, after


def _assigned(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    for target in m.findall(node, m.AssignTarget() | m.For() | m.AugAssign()):
        expr = target.target  # type: ignore[union-attr]
        names |= {n.value for n in m.findall(expr, m.Name())}  # type: ignore[union-attr]
    return names


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in m.findall(node, m.Name())}  # type: ignore[union-attr]


def _with(tape: str, body: Sequence[cst.BaseStatement]) -> cst.With:
    block = cst.parse_statement(f"with {tape}:\n    pass\n")
    assert isinstance(block, cst.With) and isinstance(block.body, cst.IndentedBlock)
    first = body[0]
    lines = list(first.leading_lines)
    while lines and lines[0].comment is None:
        lines.pop(0)  # no blank line opens the new block
    return block.with_changes(body=block.body.with_changes(body=[first.with_changes(leading_lines=lines), *body[1:]]))


class _PerFrameTape(SiteTransformer):
    """Rewrites the ``target``-th tape block holding a frame loop; see the module docstring."""

    def __init__(self, scope: TapedScope, target: int, per_window: bool) -> None:
        super().__init__(scope, target)
        self.per_window = per_window
        self.classes: list[dict[str, cst.FunctionDef]] = []
        self.functions: list[cst.FunctionDef] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
        self.classes.append({s.name.value: s for s in body if isinstance(s, cst.FunctionDef)})

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self.functions.append(node)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.functions.pop()
        return super().leave_FunctionDef(original, updated)

    def _frame_body(self, block: cst.With) -> tuple[list, cst.For, list] | None:
        """The with body split around its frame loop, a one-call body through the called method inlined."""
        if not isinstance(block.body, cst.IndentedBlock):
            return None
        body = block.body.body
        direct = _split(body)
        if direct is not None:
            return direct
        call = _single_expr(body[0]) if len(body) == 1 else None
        if not (isinstance(call, cst.Call) and m.matches(call.func, m.Attribute(value=m.Name("self")))):
            return None
        method = self.classes[-1].get(call.func.attr.value) if self.classes else None  # type: ignore[union-attr]
        if method is None or not isinstance(method.body, cst.IndentedBlock) or not self.functions:
            return None
        params = [p.name.value for p in method.params.params][1:]
        args = [code_of(a.value) if a.keyword is None and not a.star else None for a in call.args]
        plain = isinstance(method.params.star_arg, cst.MaybeSentinel) and not method.params.kwonly_params
        if args != params or not plain or method.params.star_kwarg is not None:
            return None
        split = _split(method.body.body)
        if split is None:
            return None
        # the inlined locals must not meet the caller's names
        caller = self.functions[-1]
        if (_assigned(method.body) - set(params)) & (_names(caller.body) - {"self"}):
            return None
        return split

    def _seed_and_backward(self, body: Sequence[cst.BaseStatement], index: int, tape: str) -> int | None:
        """Index just past the statements after the block that seed and run its backward, else None."""
        for j in range(index + 1, len(body)):
            receiver = _backward_of(body[j])
            if receiver is not None:
                return j + 1 if receiver == tape else None
            expr = _single_expr(body[j])
            if not (isinstance(expr, cst.Call) and ".grad." in code_of(expr.func)):
                return None
        return None

    def _site(self, body: Sequence[cst.BaseStatement], index: int) -> tuple[str, tuple, int] | None:
        block = body[index]
        if not (isinstance(block, cst.With) and is_tape_with(block)):
            return None
        tape = _tape_name(block)
        split = self._frame_body(block) if tape else None
        if tape is None or split is None:
            return None
        end = self._seed_and_backward(body, index, tape)
        if end is None or self.per_window and split[2]:
            return None
        return tape, split, end

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        body = list(updated.body)
        for index in range(len(body)):
            site = self._site(body, index)
            if site is not None and self.take():
                return updated.with_changes(body=self._rewrite(body, index, *site))
        return updated

    def _rewrite(self, body: list, index: int, tape: str, split: tuple, end: int) -> list:
        before, loop, after = split
        fresh = cst.parse_statement(f"{tape} = wp.Tape()\n")
        frame: list[cst.BaseStatement] = [fresh, _with(tape, loop.body.body)]
        tail = body[index + 1:end]
        if self.per_window:
            frame += [s.deep_clone().with_changes(leading_lines=[]) for s in tail]
        new_loop = loop.with_changes(body=loop.body.with_changes(body=frame))
        out: list[cst.BaseStatement] = []
        if before:
            out.append(_with(tape, before).with_changes(leading_lines=body[index].leading_lines))
        else:
            new_loop = new_loop.with_changes(leading_lines=[*body[index].leading_lines, *loop.leading_lines])
        out.append(new_loop)
        if self.per_window:
            return [*body[:index], *out, *body[end:]]
        if after:
            out.append(_with(tape, after))
        return [*body[:index], *out, *body[index + 1:]]


class _FrameOperator(Operator):
    rule = "WF601"
    accepts = frozenset({"WF601"})
    per_window = False

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _PerFrameTape(TapedScope(module), target, self.per_window)

    def mutate(self, source: str, site: int) -> Mutant | None:
        mutant = super().mutate(source, site)
        if mutant is None:
            return None
        mutant.anchors = _tape_lines(source, mutant.code)
        return mutant


def _tape_lines(before: str, after: str) -> list[int]:
    """Lines of the mutant's changed region (and the next backward) that create a tape or run a backward:
    where a WF601 finding may point."""
    lines = after.splitlines()
    chunks = [(j1, j2) for tag, _a, _b, j1, j2 in
              difflib.SequenceMatcher(a=before.splitlines(), b=lines, autojunk=False).get_opcodes() if tag != "equal"]
    if not chunks:
        return []
    first, last = chunks[0][0], chunks[-1][1]
    found = [n + 1 for n in range(first, last) if "Tape()" in lines[n] or ".backward(" in lines[n]]
    found += [n + 1 for n in range(last, len(lines)) if ".backward(" in lines[n]][:1]
    return found


class PerFrameTape(_FrameOperator):
    name = "per-frame-tape"
    description = "a new tape per frame of the loop the tape recorded, the one backward after the loop (truncation)"


class PerWindowBackward(_FrameOperator):
    name = "per-window-backward"
    per_window = True
    moves_backward = True
    description = "a new tape and a backward per frame, the parameters' gradients summed across frames"
