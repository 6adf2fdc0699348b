"""WF601, the truncation shape: a tape made anew in every pass of the frame loop, one backward after it.

The finding's span is the ``with tape:`` block inside the loop (``data["shape"] == "tape-per-pass"``).
The loop body holds ``tape = wp.Tape()`` as a direct statement, or the block is ``with wp.Tape() as
tape:`` (``tape`` a name or an attribute); the rewrite makes every pass record on one tape, so that the
backward after the loop replays every pass:

* when the block around the loop already makes ``tape = wp.Tape()`` before it, or resets it there
  (``self.tape.reset()``: a tape the class made once), and runs no backward, ``zero`` or ``reset`` of
  it in between, the creation in the loop is deleted: every ``with tape:`` re-enters the tape made or
  reset before the loop (a recording of the code before the loop stays on it);
* when that block does not name the tape before the loop, the creation moves before the loop.

A ``with wp.Tape() as tape:`` block becomes ``with tape:`` in both cases (and ``tape = wp.Tape()`` the
statement that moves before the loop).

Nothing else changes: no forward value, no other statement. Skipped with the reason: a loop that
assigns the tape elsewhere too, runs its backward/``zero``/``reset``, or a tape used before the loop
that was made somewhere else.

A backward in every window seeded through arrays the windows accumulate into (``costs.grad.fill_(1.0);
tape.backward()``, finding data ``seeds``; newton's drone) gets the same one tape, and the seeds and the
backward move after the loop (:class:`OneTapeOverSeededWindows`).

``WF601Fixes`` is the command registered for WF601: it hands a finding of these shapes to the classes
here and any other to the window hoist (``codemods/wf601_hoist.py``).
"""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext

from codemods._base import FindingCommand
from codemods._cst import is_warp_call, method_call
from codemods.wf601_hoist import HoistWindowTape
from warpfix.finding import Finding

SHAPE = "tape-per-pass"


class OneTapeOverPasses(FindingCommand):
    DESCRIPTION = "WF601: one tape over every pass of the frame loop (the per-pass `tape = wp.Tape()` hoisted)."
    RULES = ("WF601",)
    DATA = {"loop": "the frame loop (dict with `line`)", "tape": "the tape's name",
            "setup_lines": "lines of untaped launches before the loop that set what it reads from a parameter"}

    def describe_missing(self) -> str:
        return "no `with <tape>:` block"

    def plan(self, tree: cst.Module) -> None:
        block = self.on_line(cst.With, lambda w: len(w.items) == 1)
        item = block.items[0]
        tape = self.code(item.asname.name if item.asname is not None else item.item)
        if self.data["tape"] and self.data["tape"] != tape:
            raise self.not_applicable(f"the block records on {tape}, not {self.data['tape']}")
        loop = self.enclosing(block, cst.For)
        wanted = self.data["loop"]
        if loop is None or isinstance(wanted, dict) and wanted.get("line") and self.pos(loop).start.line != int(
            wanted["line"]
        ):
            raise self.not_applicable("the frame loop does not hold the block")
        if self._uses(loop, tape, ("backward",)):
            raise self.not_applicable(f"the loop runs {tape}'s backward")
        self.one_tape(loop, tape)

    def one_tape(self, loop: cst.For, tape: str) -> None:
        """Every pass of ``loop`` re-enters one tape: the creation in its body goes (or moves before it)."""
        creations = [s for s in loop.body.body if self._creates(s, tape) or self._with_creates(s, tape)]
        if len(creations) != 1:
            raise self.not_applicable(
                f"the loop body has {len(creations)} `{tape} = wp.Tape()` statements or `with wp.Tape() as {tape}:` "
                "blocks, not 1"
            )
        if self._rebinds(loop, tape) != 1 or self._uses(loop, tape, ("zero", "reset")):
            raise self.not_applicable(f"the loop assigns {tape} again or runs its zero or reset")
        outer = list(self.block_of(loop))
        before = outer[: outer.index(loop)]
        # made there, or reset there (a tape the class made once: the reset shows it is one by then)
        made = next((i for i in range(len(before) - 1, -1, -1)
                     if self._creates(before[i], tape) or self._resets(before[i], tape)), None)
        if made is not None:
            if any(self._uses(s, tape, ("backward", "zero", "reset")) or self._rebinds(s, tape)
                   for s in before[made + 1 :]):
                raise self.not_applicable(f"{tape} is used between its creation and the loop")
            self._drop_creation(creations[0], tape)
            return
        if any(tape in self.code(s) for s in before):
            raise self.not_applicable(f"{tape} is used before the loop but not made in its block")
        made = creations[0]
        setup = self._setup(before)
        anchor = setup[0] if setup else loop
        if isinstance(made, cst.With):  # `with wp.Tape() as tape:`: the creation becomes a statement
            self.insert_before(anchor, [self.statement(f"{tape} = {self.code(made.items[0].item)}\n")])
            self._drop_creation(made, tape)
        else:
            self.move_before(made, anchor)
        if setup:
            self._record(setup, tape)

    def _setup(self, before: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """The statements before the loop holding the finding's set-up launches (``setup_lines``): one run of
        statements of the loop's own block, so that one ``with`` block can record them."""
        lines = {int(n) for n in self.data["setup_lines"] or ()}
        if not lines:
            return []
        at = [k for k, s in enumerate(before) if self.pos(s).start.line in lines]
        found = {self.pos(before[k]).start.line for k in at}
        if found != lines or at != list(range(at[0], at[-1] + 1)):
            missing = ", ".join(str(n) for n in sorted(lines - found)) or "between them"
            raise self.not_applicable(
                f"the launches that set the first pass's state from a parameter (line {missing}) are not one run of "
                "statements before the loop in its block: recording them on the tape is not mechanical")
        return [before[k] for k in at]

    def _record(self, setup: list[cst.BaseStatement], tape: str) -> None:
        """``with <tape>:`` around the set-up statements (their comments and blank lines stay above it)."""
        first = setup[0]
        lead = getattr(first, "leading_lines", ())
        body = [first.with_changes(leading_lines=()), *setup[1:]]  # type: ignore[call-arg]
        block = self.statement(f"with {tape}:\n    pass\n")
        assert isinstance(block, cst.With) and isinstance(block.body, cst.IndentedBlock)
        self.replace(first, block.with_changes(leading_lines=lead, body=block.body.with_changes(body=body)))
        for stmt in setup[1:]:
            self.remove(stmt)
        self.context.scratch["summary"] = (
            f"one tape over every pass; the set-up before the loop (line {self.pos(first).start.line}) recorded "
            f"on `{tape}` too: it sets the first pass's state from a parameter")

    def _drop_creation(self, made: cst.BaseStatement, tape: str) -> None:
        """The pass no longer makes the tape: ``tape = wp.Tape()`` goes, ``with wp.Tape() as tape:`` becomes
        ``with tape:``."""
        if isinstance(made, cst.With):
            self.replace(made, lambda new: new.with_changes(
                items=[new.items[0].with_changes(item=self.expression(tape), asname=None)]))
        else:
            self.remove(made)

    def _creates(self, stmt: cst.BaseStatement, tape: str) -> bool:
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
            return False
        assign = stmt.body[0]
        return (
            isinstance(assign, cst.Assign) and len(assign.targets) == 1 and self.code(assign.targets[0].target) == tape
            and is_warp_call(assign.value, "Tape") and not assign.value.args
        )

    def _with_creates(self, stmt: cst.BaseStatement, tape: str) -> bool:
        """``with wp.Tape() as <tape>:`` (the block records on the tape it makes)."""
        if not isinstance(stmt, cst.With) or len(stmt.items) != 1:
            return False
        item = stmt.items[0]
        return item.asname is not None and self.code(item.asname.name) == tape and is_warp_call(
            item.item, "Tape") and not item.item.args

    def _resets(self, stmt: cst.BaseStatement, tape: str) -> bool:
        """``<tape>.reset()`` as a statement of its own."""
        call = method_call(stmt, "reset")
        return call is not None and self.code(call.func.value) == tape

    def _rebinds(self, root: cst.CSTNode, tape: str) -> int:
        targets = [t.target for t in self.nodes(root, cst.AssignTarget)]
        targets += [w.asname.name for w in self.nodes(root, cst.WithItem) if w.asname is not None]
        return sum(self.code(t) == tape for t in targets)

    def _uses(self, root: cst.CSTNode, tape: str, methods: tuple[str, ...]) -> bool:
        return any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value in methods and self.code(c.func.value) == tape
            for c in self.nodes(root, cst.Call)
        )


class OneTapeOverSeededWindows(OneTapeOverPasses):
    """A backward per window seeded through arrays every window accumulates into (``data["seeds"]``, e.g.
    ``costs.grad.fill_(1.0); tape.backward()``): one tape over the windows, the seeds and the backward
    after the loop. The seeded arrays then hold every window's costs, so the one backward is the
    gradient of their sum over the episode."""

    DATA = {**OneTapeOverPasses.DATA, "seeds": "the arrays the backward is seeded through (list)"}

    def describe_missing(self) -> str:
        return "no `tape.backward()` call"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, lambda c: isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward")
        assert isinstance(call.func, cst.Attribute)
        tape, backward = self.code(call.func.value), self.statement_of(call)
        loop = self.enclosing(backward, cst.For)
        if loop is None or self.parent(backward) is not loop.body:
            raise self.not_applicable("the backward is not a statement of the window loop's body")
        body = list(loop.body.body)
        tail = body[body.index(backward) - len(self.data["seeds"] or ()) :]
        seeds = {f"{name}.grad" for name in self.data["seeds"] or ()}
        if tail[-1] is not backward or not seeds or {self._seeded(s) for s in tail[:-1]} != seeds:
            raise self.not_applicable("the loop body does not end with the seeds' fill and the backward")
        if any(".grad" in self.code(s) for s in body[: body.index(tail[0])]):
            raise self.not_applicable("the window reads a gradient before its backward")
        self.one_tape(loop, tape)
        for stmt in tail:
            self.move_after(stmt, loop)

    def _seeded(self, stmt: cst.BaseStatement) -> str | None:
        """``x.grad`` of a statement ``x.grad.fill_(...)`` / ``x.grad.assign(...)``."""
        call = method_call(stmt, "fill_", "assign")
        return self.code(call.func.value) if call is not None else None


class WF601Fixes(HoistWindowTape):
    """The WF601 command: the window hoist, or :class:`OneTapeOverPasses` for the tape-per-pass shape."""

    @classmethod
    def from_finding(cls, context: CodemodContext, finding: Finding, *, line: int | None = None) -> FindingCommand:
        if finding.data.get("shape") == SHAPE:
            return OneTapeOverPasses.from_finding(context, finding, line=line)
        if finding.data.get("seeds"):
            return OneTapeOverSeededWindows.from_finding(context, finding, line=line)
        return HoistWindowTape.from_finding(context, finding, line=line)
