"""WF302 / WF303 / WF304: move a statement to the other side of ``tape.backward(...)``.

* WF302: work after the loss inside ``with tape:`` -> just after the backward that follows
  the ``with`` block;
* WF303: a write between the tape block and its backward -> just after the backward;
* WF304: a ``.grad`` read before the backward that produces it -> just after the backward;
  a ``.grad`` read after ``tape.zero()``/``tape.reset()`` -> just before it.

Statements keep their comments and, when several are moved, their order (findings are
applied bottom-up). Finding data (optional): ``tape`` -- the tape's expression text
(default: any ``<x>.backward(...)``). The span's line is the statement to move.

The span may be any line of the statement (a continuation line of a multi-line call).

Strategies, in this order (the report names a non-default one):

* move the statement alone;
* move it **with the statements using it**: statements between it and the backward that read
  what it binds (names, or attributes like ``self.g``) go along, in order, when none of them
  records on a tape or mutates arrays (launch, copy, assign, zero_/fill_, backward);
* (WF304 after ``tape.zero()``) when the read cannot move before the zero, **move the zero** to
  just after the read, when nothing in between reads a gradient or runs a backward.

* when the statement is in the body of a ``for`` loop (an update over the parameters) and the
  backward follows that loop, **move the loop** (with the same checks);
* (WF303) when no backward follows in the block (a trainer's ``backward()`` runs it later), **write
  into a copy**: ``X = wp.clone(X)`` just before the write, where ``X`` is a pure output of the write
  and the file uses ``X`` only as launch/copy arguments, assignments and ``.numpy()``/``.grad`` reads.
* (WF302) when no backward follows the tape block because another method of the class runs it
  (``forward()`` records, ``backward()`` runs ``self.tape.backward``), **move it to the callers**: just
  after each ``backward()`` call that follows a call of ``forward()`` in the same block, ``self`` written as
  the instance called on; only when every use of ``forward()`` is such a call and the statements crossed
  (the rest of ``forward()``, the rest of ``backward()``, the caller's statements between) only read
  (``codemods/_backward_method.py``).

Skipped with a reason when the backward is not a statement of the same block (after the
``with``) and no copy applies, or when moving would change what some statement in between reads (the
moved statements bind a name read there, or read one bound there).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from codemods._backward_method import NO_BACKWARD, BackwardMethod, as_called_on
from codemods._base import NotApplicable
from codemods._cst import call_name, launch_writes, method_call
from codemods._hoist_gradients import data_lines
from codemods._statement_names import bound_names, effects, read_names
from warpfix.model.grad_reads import cst_reads_grad


class MoveAcrossBackward(BackwardMethod):
    DESCRIPTION = "WF302/WF303/WF304: move work after tape.backward(...) (or a .grad read before tape.zero())."
    RULES = ("WF302", "WF303", "WF304")
    DATA = {"tape": "the tape expression (`tape`, `self.tape`)",
            "written": "(WF303) the array the write overwrites, as written",
            "backward_line": "the line of the call, in the statement's block, that runs the backward",
            "consumer_lines": "lines of that block's statements after it that read a gradient",
            "grad_write_lines": "lines of statements after the backward that overwrite the gradient read (a clip)",
            "yield_line": "a generator's yield to the loop that reads the gradient, before its backward"}

    def describe_missing(self) -> str:
        return "no statement"

    def _is_tape(self, call: cst.Call) -> bool:
        assert isinstance(call.func, cst.Attribute)
        wanted = self.data["tape"]
        return not wanted or self.code(call.func.value) == wanted

    def plan(self, tree: cst.Module) -> None:
        # the statement starting on the line, else the innermost one spanning it (a continuation line)
        stmt = self.on_line(
            (cst.SimpleStatementLine, cst.BaseCompoundStatement),
            lambda s: isinstance(s, cst.SimpleStatementLine) or self.pos(s).start.line == self.line,
        )
        block = list(self.block_of(stmt))
        if not block:
            raise self.not_applicable("the statement is not in a block")
        if self.data["yield_line"]:
            self._backward_before_the_yield(stmt, block)
            return
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
        if isinstance(outer, cst.With) and len(block) == 1 and self._alone_in_tape_block(stmt, outer):
            return
        index = block.index(stmt)
        anchor = self._backward_after(block, index)
        if anchor is not None:
            self._move(stmt, anchor, block[index + 1: block.index(anchor) + 1], after=True)
            return
        if self.data["backward_line"] and self._after_the_backward_call(stmt, block, index):
            return
        loop = self._loop_around(stmt)
        if loop is not None:
            outer_block = list(self.block_of(loop))
            anchor = self._backward_after(outer_block, outer_block.index(loop))
            if anchor is not None:  # ``for p in params: launch(sgd, [p, p.grad])`` before the backward
                self._move(loop, anchor, outer_block[outer_block.index(loop) + 1: outer_block.index(anchor) + 1],
                           after=True)
                self.context.scratch["summary"] = f"moved the loop holding it (line {self.pos(loop).start.line})"
                return
        if cst_reads_grad(stmt):
            zero = next(
                (
                    s
                    for s in reversed(block[:index])
                    if (c := method_call(s, "zero", "reset")) is not None and self._is_tape(c)
                ),
                None,
            )
            if zero is not None:
                try:
                    self._move(stmt, zero, block[block.index(zero): index], after=False)
                except NotApplicable as exc:
                    self._move_zero_after(zero, stmt, block[block.index(zero) + 1: index], exc)
                return
        if self.data["written"]:
            self._write_into_copy(stmt, str(self.data["written"]))
            return
        tape = str(self.data["tape"] or "")
        if isinstance(outer, cst.With) and stmt is not block[0] and tape and self._records(outer, tape):
            self._move_to_callers(stmt, outer, tape)
            return
        raise self.not_applicable("no `tape.backward(...)` statement follows in the same block")

    def _after_the_backward_call(self, stmt: cst.BaseStatement, block: list[cst.BaseStatement], index: int) -> bool:
        """The statement is a call the loop makes before the call that runs the backward (``trainer.apply()``
        before ``trainer.backward()``, :mod:`warpfix.model.call_order`): it moves after that call and after the
        loop's later statements that read a gradient (``callback(...)``), which it would otherwise change."""
        line = int(str(self.data["backward_line"]))
        consumers = {int(n) for n in self.data["consumer_lines"] or ()}
        later = block[index + 1:]
        backward = next((s for s in later if self.pos(s).start.line == line), None)
        if backward is None:
            return False
        rest = later[later.index(backward):]
        dest = max((s for s in rest if self.pos(s).start.line in consumers), key=rest.index, default=backward)
        self._move(stmt, dest, later[: later.index(dest) + 1], after=True)
        self.context.scratch["summary"] = (
            f"moved after the call that runs the backward (line {line})"
            + (f" and the gradient reads after it (to line {self.pos(dest).start.line})" if dest is not backward else "")
        )
        return True

    def _move_to_callers(self, stmt: cst.BaseStatement, block: cst.With, tape: str) -> None:
        """The backward is another method's (``backward()``), called after the tape block's method by the
        same loop: the statement goes just after each such call (:mod:`codemods._backward_method`)."""
        found = self._backward_elsewhere(stmt, block, tape)
        method = self.enclosing(block, cst.FunctionDef)
        assert method is not None
        name = method.name.value
        bound, read = bound_names(stmt), read_names(stmt)
        params = {p.name.value for p in [*method.params.posonly_params, *method.params.params,
                                         *method.params.kwonly_params]}
        local = params | set().union(*(bound_names(s) for s in method.body.body))
        plain = {n for n in bound | read if "." not in n and n != "self"}
        if plain & local:
            raise self.not_applicable(f"{NO_BACKWARD}, and the statement uses {', '.join(sorted(plain & local))}, local to {name}()")
        for site in found.sites:
            caller = self.enclosing(site.anchor, cst.FunctionDef)
            shadowed = plain & set().union(*(bound_names(s) for s in (caller.body.body if caller else ())))
            if shadowed:
                raise self.not_applicable(f"{NO_BACKWARD}, and {', '.join(sorted(shadowed))} is bound in {caller.name.value}(), which "
                                          f"calls {name}() at line {self.pos(site.anchor).start.line}")
        for other in [*found.crossed, *(s for site in found.sites for s in site.between)]:
            where = f"line {self.pos(other).start.line}"
            if effects(other) or not self._only_reads(other):
                raise self.not_applicable(f"{NO_BACKWARD}, and {where} runs code between the statement and the backward of "
                                          f"{found.backward.name.value}() that the move would put before it")
            if bound & read_names(other):
                raise self.not_applicable(f"{NO_BACKWARD}, and {where} reads {', '.join(sorted(bound & read_names(other)))}")
            if bound_names(other) & read:
                raise self.not_applicable(f"{NO_BACKWARD}, and {where} rebinds {', '.join(sorted(bound_names(other) & read))}")
        self.remove(stmt)
        for site in found.sites:
            self.insert_after(site.anchor, [as_called_on(stmt, site.receiver)])
        lines = ", ".join(str(self.pos(site.anchor).start.line) for site in found.sites)
        self.summary(f"moved to the callers: after {found.backward.name.value}() (line(s) {lines}), which runs "
                     f"{tape}.backward(...) after each call of {name}()")

    def _backward_before_the_yield(self, stmt: cst.BaseStatement, block: list[cst.BaseStatement]) -> None:
        """A generator that yields to its caller's loop (which steps the optimizer) before its own backward: the
        backward moves before the ``yield`` (the yielded loss is computed before either)."""
        wanted = int(self.data["backward_line"] or 0)
        backward = next((s for s in block[block.index(stmt) + 1:] if self.pos(s).start.line == wanted), None)
        call = method_call(backward, "backward") if backward is not None else None
        if backward is None or call is None or not self._is_tape(call):
            raise self.not_applicable(f"no `tape.backward(...)` at line {wanted} after the yield in its block")
        self._move(backward, stmt, block[block.index(stmt): block.index(backward)], after=False)
        self.context.scratch["summary"] = f"moved the backward (line {wanted}) before the yield"

    def _alone_in_tape_block(self, stmt: cst.BaseStatement, block: cst.With) -> bool:
        """``with tape: <step>`` holding nothing else, the backward after it: the step moves after the backward
        and the emptied tape block goes (it recorded nothing else). False when no backward follows it."""
        outer_block = list(self.block_of(block))
        anchor = self._backward_after(outer_block, outer_block.index(block))
        if anchor is None:
            return False
        between = outer_block[outer_block.index(block) + 1: outer_block.index(anchor)]
        self._move(stmt, anchor, [*between, anchor], after=True)
        self.remove(block)
        self.context.scratch["summary"] = (f"moved after the backward (line {self.pos(anchor).start.line}); the "
                                           "`with` block that held only it is gone")
        return True

    def _loop_around(self, stmt: cst.BaseStatement) -> cst.For | None:
        """The ``for`` loop whose body ``stmt`` is a direct statement of (an update over the parameters,
        moved as one), when nothing in it leaves the loop early or opens a block (``return``, ``break``,
        ``continue``, ``yield``, ``with``)."""
        body = self.parent(stmt)
        loop = self.parent(body) if isinstance(body, cst.IndentedBlock) else None
        if not isinstance(loop, cst.For) or loop.orelse is not None:
            return None
        if any(self.nodes(loop, (cst.Return, cst.Break, cst.Continue, cst.Yield, cst.With))):
            return None
        return loop

    def _write_into_copy(self, stmt: cst.BaseStatement, written: str) -> None:
        """WF303 where no backward follows in the block (it runs in another method, ``trainer.backward()``):
        ``X = wp.clone(X)`` just before the launch or copy that writes ``X``. The copy holds the same
        contents, so the write and every later read see what they saw before; the array the tape read
        keeps its contents for the backward. Only where ``X`` is a pure output of the write and every use
        of ``X`` in the file is a launch or copy argument, an assignment to it, or ``.numpy()``/``.grad``:
        an object that holds the old array (an optimizer's parameter list) would not see the copy."""
        no_backward = "no `tape.backward(...)` statement follows in the same block"
        call = next((c for c in self.nodes(stmt, cst.Call) if written in map(self.code, launch_writes(c)[0])), None)
        outputs, inputs = launch_writes(call) if call is not None else ([], [])
        if call is None or written in map(self.code, inputs):
            raise self.not_applicable(f"{no_backward}, and the statement does not write `{written}` as a pure output")
        target = next(o for o in outputs if self.code(o) == written)
        member = written[len("self."):] if written.startswith("self.") and written.count(".") == 1 else None
        for node in self.nodes(self.tree, (cst.Name, cst.Attribute, cst.Subscript)):
            # ``self.tip``, and ``trainer.tip`` outside the class
            same = self.code(node) == written or member is not None and isinstance(node, cst.Attribute) and (
                node.attr.value == member and isinstance(node.value, cst.Name))
            if not same or self._plain_use(node):
                continue
            raise self.not_applicable(f"{no_backward}, and `{written}` is used at line {self.pos(node).start.line} "
                                      "where a copy of it would not reach")
        self.check_rebindable(target, stmt, f"line {self.line}")
        self.insert_before(stmt, [self.statement(f"{written} = {self.warp_alias()}.clone({written})\n")])
        self.context.scratch["summary"] = (f"write into a copy: `{written} = wp.clone({written})` before the write; "
                                           "the tape keeps the contents it read")

    def _plain_use(self, node: cst.CSTNode) -> bool:
        """``node`` is a launch or copy argument, assigned to, or read through ``.numpy()``/``.grad``."""
        parent = self.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return parent.attr.value in ("numpy", "grad", "shape", "dtype", "device")
        if isinstance(parent, cst.AssignTarget):
            return True
        call = next((a for a in self.ancestors(node) if isinstance(a, cst.Call)), None)
        if call is None or call_name(call) not in ("launch", "copy"):
            return False
        arguments = [*launch_writes(call)[0], *launch_writes(call)[1]]
        return any(a is e for a in (node, *self.ancestors(node)) for e in arguments)  # inside an argument

    def _backward_after(self, block: Sequence[cst.BaseStatement], index: int) -> cst.BaseStatement | None:
        """The tape's backward after ``block[index]``, or the last statement after it that overwrites the
        gradient the moved statement reads (``grad_write_lines``: a host clip), where the gradient is final."""
        for k, s in enumerate(block[index + 1:], index + 1):
            call = method_call(s, "backward")
            if call is not None and self._is_tape(call):
                writes = data_lines(self.data["grad_write_lines"])
                later = [t for t in block[k + 1:] if self.pos(t).start.line in writes]
                return later[-1] if later else s
        return None

    def _move(
        self, stmt: cst.BaseStatement, anchor: cst.BaseStatement, crossed: Sequence[cst.BaseStatement], *, after: bool
    ) -> None:
        group = [stmt]
        if after:  # the statements using what the moved one binds go along, in order
            bound = bound_names(stmt)
            for other in crossed:
                if other is not anchor and bound & read_names(other) and not effects(other):
                    group.append(other)
                    bound |= bound_names(other)
        bound = set().union(*(bound_names(g) for g in group))
        read = set().union(*(read_names(g) for g in group))
        for other in crossed:
            if any(other is g for g in group):
                continue
            if bound & read_names(other):
                raise self.not_applicable(
                    f"line {self.pos(other).start.line} reads {', '.join(sorted(bound & read_names(other)))}"
                )
            if bound_names(other) & read:
                raise self.not_applicable(
                    f"line {self.pos(other).start.line} rebinds {', '.join(sorted(bound_names(other) & read))}"
                )
        if after:
            for g in group:
                self.move_after(g, anchor)
            if len(group) > 1:
                lines = ", ".join(str(self.pos(g).start.line) for g in group[1:])
                self.context.scratch["summary"] = f"moved with the statements using it (line(s) {lines})"
        else:
            self.move_before(stmt, anchor)

    def _move_zero_after(
        self, zero: cst.BaseStatement, read: cst.BaseStatement, between: Sequence[cst.BaseStatement], why: Exception
    ) -> None:
        """Clear the gradients after their last reader instead of moving the reader before the clear."""
        for other in between:
            if cst_reads_grad(other) or any(
                call_name(c) == "backward" for c in self.nodes(other, cst.Call)
            ):
                raise self.not_applicable(
                    f"{why}; and the zero cannot move after the read: line {self.pos(other).start.line} uses gradients"
                )
        self.move_after(zero, read)
        self.context.scratch["summary"] = "moved the tape's zero after the gradient's reader"
