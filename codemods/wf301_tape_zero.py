"""WF301: gradients summed over optimizer iterations for want of ``tape.zero()`` / ``tape.reset()``.

Strategies, tried in this order (the applied one is named in the report):

* **re-recorded tape** (finding data ``rerecorded``: the tape is re-entered every iteration
  without ``reset()``, so each backward replays the old launches too):
  in a loop, the loop's own ``<tape>.zero()`` becomes ``<tape>.reset()``, or ``<tape>.reset()``
  is added as the loop's last statement; with the backward in a function that is called from a
  loop elsewhere (``self.tape.backward(self.loss)`` in ``forward_backward()``),
  ``<tape>.reset()`` goes just before the function's ``with <tape>:`` block (the old recording and
  the consumed gradients are cleared before the new recording starts), or, for a ``self.<tape>``
  recorded in another method of the class (``forward()``), before that method's one ``with`` block;
* **zero after consumption**: ``<tape>.zero()`` as the last statement of the innermost loop
  around the backward (before a trailing ``continue``/``break``);
* **zero inside the consuming ``if`` arm**: in that loop, when every gradient read after the
  backward lies in one arm of one ``if`` (checkpoint segments: ``if segment_index > 0:`` hands
  the gradients on to the next segment, and the last segment's are left for the caller),
  ``<tape>.zero()`` after the last read in that arm, never in the others;
* **zero at the method's caller**: that loop already zeroes ``self.<tape>`` where it hands gradients
  on (checkpoint segments) and the gradient it leaves is its caller's: at each loop calling the
  method on an instance of its class (``example = Example(...)``), ``example.<tape>.zero()``
  after that loop's last gradient read (the optimizer step);
* **zero after the last consumer**: a backward in no loop of its function (a fresh local tape per
  call, a ``self.<tape>`` in ``step()`` run by a loop elsewhere): ``<tape>.zero()`` after the
  last statement of the function that reads a gradient once the backward has run (in that
  statement's own block: ``rot_grad = tape.gradients[x]; opt.step([rot_grad])``; inside an
  ``if`` arm by the rule above), else, for a ``self.<tape>``, in the method of the same class
  that calls it -- newton's trainers' own shape;
* **zero in the consuming method**: the backward's method is called on an instance in a loop outside
  its class (``trainer.backward()``) and that loop's last gradient consumer after it is another method
  of the class (``trainer.step()``, the optimizer step), which the file calls nowhere else:
  ``self.<tape>.zero()`` after that method's last gradient read;
* **zero at the caller**: a function that returns the gradient (``return tape.gradients[x]``,
  ``return x.grad``): at each call ``g = f(...)``, ``g.zero_()`` after the last read of ``g``
  (``g`` is the gradient array itself; a copy before returning would change what the caller
  holds, so it is not made);
* **zero between the backwards** (finding data ``earlier_line``, the earlier backward in the same
  block: ``tape.backward(objective)``, a read of the gradient, ``tape.backward(volume)``, the second
  replaying the first's recording), when no strategy above applies: ``<tape>.zero()`` after the
  last statement between the two that reads a gradient;
* **zero after the earlier backward's consumer** (finding data ``earlier_line``: the gradient left
  over comes from another backward of the same file, e.g. a gradient check's own local tape run
  once before training), when no strategy above applies at the finding's backward: that earlier
  backward's ``<tape>.zero()`` after the last statement of its function that reads a gradient
  (the strategy *zero after the last consumer*, at the backward that left the gradient);
* **zero before backward**: with ``arrays`` given (a tape that is fresh each iteration while
  persistent arrays keep their ``.grad``), ``<array>.grad.zero_()`` just before the backward,
  for each array whose name the function can see (not ``<tape>.zero()``: before its first backward
  a fresh tape holds no gradient to zero, Warp's ``Tape.zero`` clears the gradients its backwards
  registered). The only strategy tried with ``arrays_only``
  (an intermediate's left-over adjoint while the program sums the parameters' gradients over
  several backwards: clearing the tape would clear those sums too).

A gradient read is :mod:`warpfix.model.grad_reads`' (``x.grad``, ``tape.gradients[x]``,
``tape.gradients.get(x)``, or a local bound from one). When no strategy applies the report
says why each could not.

Nothing changes a forward value: only gradient buffers are cleared, after their use.

Finding data (optional): ``tape`` -- the tape expression (default: the object whose
``.backward`` is called at the span); ``arrays`` -- list (or comma-separated text) of
array expressions whose ``.grad`` to zero before the backward; ``rerecorded`` -- true for a
tape re-entered without reset.

The strategies that look outside the backward's function (the recording method, the callers of a
function returning the gradient, the consuming method, the method's callers) live in the base
:class:`~codemods._zero_callers.CallerZero` (``codemods/_zero_callers.py``); the queries all strategies
share (the tape's zero/reset calls and recordings, the last gradient read) in its base
:class:`~codemods._tape_reads.TapeReads` (``codemods/_tape_reads.py``).
"""

from __future__ import annotations

import libcst as cst

from codemods._base import NotApplicable
from codemods._cst import call_name, dotted, target_names
from codemods._zero_callers import CallerZero
from warpfix.model.grad_reads import cst_grad_locals, cst_reads_grad


def _flag(value: object) -> bool:
    """A data flag set, given as a bool (findings) or as text (the command line)."""
    return value in (True, "true", "True", "1")


class ZeroTape(CallerZero):
    DESCRIPTION = "WF301: zero (or reset) the tape's gradients once per optimizer iteration."
    RULES = ("WF301",)
    DATA = {
        "tape": "the tape expression",
        "arrays": "arrays whose .grad to zero before the backward",
        "rerecorded": "the tape is re-entered every iteration without reset()",
        "earlier_line": "line of the earlier backward whose gradient is left over (same file)",
        "arrays_only": "only zero the named arrays before the backward: the program sums the parameters' "
                       "gradients over backwards, which zeroing the tape would undo",
    }

    def describe_missing(self) -> str:
        return "no `tape.backward(...)` call"

    def plan(self, tree: cst.Module) -> None:
        try:
            self._plan_at_backward()
        except NotApplicable as exc:
            try:
                if self._zero_after_earlier_backward():
                    return
            except NotApplicable as other:
                if self._zero_before_as_last_resort():
                    return
                raise self.not_applicable(f"{exc}; and at the earlier backward: {other}") from None
            if self._zero_before_as_last_resort():
                return
            raise

    def _zero_before_as_last_resort(self) -> bool:
        """*zero before backward* where every other strategy failed though the finding names the arrays (a tape
        already zeroed where the gradient is handed on: the windows' sum written back into ``p.grad`` for a
        later method's update, which the next backward then adds onto). False when it does not apply either."""
        arrays = self._arrays()
        if not arrays:
            return False
        call = self.on_line(cst.Call, lambda c: call_name(c) == "backward" and isinstance(c.func, cst.Attribute))
        try:
            self._zero_before(self.statement_of(call), arrays, self.enclosing(call, cst.FunctionDef))
        except NotApplicable:
            return False
        return True

    def _plan_at_backward(self) -> None:
        """Every strategy but the earlier backward's, at the finding's backward (see the module docstring)."""
        call = self.on_line(cst.Call, lambda c: call_name(c) == "backward" and isinstance(c.func, cst.Attribute))
        assert isinstance(call.func, cst.Attribute)
        tape = self.data["tape"] or self.code(call.func.value)
        stmt = self.statement_of(call)
        loop = self.enclosing(call, (cst.For, cst.While))
        func = self.enclosing(call, cst.FunctionDef)
        if func is not None and loop is not None and not any(a is func for a in self.ancestors(loop)):
            loop = None  # a loop around the whole function definition is no loop of this backward
        rerecorded = _flag(self.data["rerecorded"])
        if _flag(self.data["arrays_only"]):
            return self._zero_before(stmt, self._arrays(), func)
        if rerecorded:
            if loop is not None:
                return self._reset_in_loop(loop, tape)
            return self._reset_before_recording(stmt, tape)
        if loop is not None and isinstance(loop.body, cst.IndentedBlock):
            body = list(loop.body.body)
            if any(self._calls(s, tape, ("zero", "reset")) for s in body):
                if func is not None and tape.startswith("self.") and self._zero_at_method_callers(func, tape):
                    return
                raise self.not_applicable(f"the loop already calls {tape}.zero()")
            place = self._last_consumer(stmt, loop.body)
            if place is not None and place[1]:
                self.insert_after(place[0], [self.statement(f"{tape}.zero()\n")])
                self.summary("zero inside the consuming `if` arm: `tape.zero()` after the last gradient read "
                             f"of the arm (line {self.pos(place[0]).start.line}), where the gradient is consumed")
                return
            self._append_to_loop(loop, self.statement(f"{tape}.zero()\n"))
            self.summary("zero after consumption: `tape.zero()` at the end of the loop")
            return
        if func is not None and self._zero_after_consumer(stmt, func, tape):
            return
        if func is not None and tape.startswith("self.") and self._zero_in_consuming_method(func, tape):
            return
        caller = "nothing reads it at the caller of a function returning it"
        try:
            if func is not None and self._zero_at_caller(func):
                return
        except NotApplicable as exc:
            caller = str(exc)
        arrays = self._arrays()
        unnamed = "the finding names no array whose .grad to zero"
        if arrays:
            try:
                self._zero_before(stmt, arrays, func)
                return
            except NotApplicable as exc:
                unnamed = str(exc)
        raise self.not_applicable(
            "the backward is not in a loop of its function, no statement after it reads a gradient (in its "
            f"function or a method calling it), {caller}, and {unnamed}"
        )

    def _arrays(self) -> list[str]:
        """The finding's ``arrays``, each once (however often it is named)."""
        arrays = self.data["arrays"]
        if isinstance(arrays, str):
            arrays = [a.strip() for a in arrays.split(",") if a.strip()]
        return list(dict.fromkeys(arrays or ()))

    # -- strategies -----------------------------------------------------------------------
    def _reset_in_loop(self, loop: cst.For | cst.While, tape: str) -> None:
        if not isinstance(loop.body, cst.IndentedBlock):
            raise self.not_applicable("the loop body is on one line")
        zeros = [c for s in loop.body.body for c in self._calls(s, tape, ("zero",))]
        if any(self._calls(s, tape, ("reset",)) for s in loop.body.body):
            raise self.not_applicable(f"the loop already calls {tape}.reset()")
        if len(zeros) == 1:
            attr = zeros[0].func
            self.replace(attr, lambda new: new.with_changes(attr=cst.Name("reset")))
            self.summary("re-recorded tape: the loop's `tape.zero()` becomes `tape.reset()`")
            return
        self._append_to_loop(loop, self.statement(f"{tape}.reset()\n"))
        self.summary("re-recorded tape: `tape.reset()` at the end of the loop")

    def _reset_before_recording(self, backward: cst.BaseStatement, tape: str) -> None:
        block = self.block_of(backward)
        before = list(block[: list(block).index(backward)]) if backward in block else []
        withs = [s for s in before if isinstance(s, cst.With) and self._records(s, tape)]
        if not withs and self._reset_in_recording_method(backward, tape):
            return
        if len(withs) != 1:
            raise self.not_applicable(
                f"the backward is not in a loop and its block does not record {tape} in exactly one `with` "
                f"(found {len(withs)}): where to reset it is not mechanical"
            )
        if any(self._calls(s, tape, ("reset",)) for s in before):
            raise self.not_applicable(f"{tape} is already reset before it records")
        self.insert_before(withs[0], [self.statement(f"{tape}.reset()\n")])
        self.summary("re-recorded tape: `tape.reset()` before the function records it")

    def _zero_before(self, backward: cst.BaseStatement, arrays: list[str], func: cst.FunctionDef | None) -> None:
        visible = self._visible_names(func)
        for array in arrays:
            try:
                root = self.expression(array)
            except cst.ParserSyntaxError:
                raise self.not_applicable(f"{array!r} is not an expression") from None
            base = root
            while isinstance(base, (cst.Attribute, cst.Subscript)):
                base = base.value
            if not isinstance(base, cst.Name) or dotted(root) is None and not isinstance(root, cst.Subscript):
                raise self.not_applicable(f"{array} is not a plain array expression")
            if visible is not None and base.value not in visible:
                raise self.not_applicable(f"{array} is not visible where the backward runs")
            if base.value == "self" and isinstance(root, cst.Attribute) and not self._class_sets(func, root):
                raise self.not_applicable(f"{array} is not an attribute this class sets (the model named it "
                                          "from another class's `self`)")
        block = list(self.block_of(backward))
        before = {self.code(s).strip() for s in block[: block.index(backward)]} if backward in block else set()
        arrays = [a for a in arrays if f"{a}.grad.zero_()" not in before]
        if not arrays:
            raise self.not_applicable("every named .grad is already zeroed before the backward")
        self.insert_before(backward, [self.statement(f"{a}.grad.zero_()\n") for a in arrays])
        self.summary(f"zero before backward: {', '.join(a + '.grad' for a in arrays)} cleared before it")

    def _zero_after_consumer(self, backward: cst.BaseStatement, func: cst.FunctionDef, tape: str) -> bool:
        """``<tape>.zero()`` after the last statement that reads a gradient once the backward has run: in
        ``func`` itself, else (a ``self.<tape>``) in the methods of its class that call it."""
        places: list[tuple[cst.FunctionDef, cst.BaseStatement]] = [(func, backward)]
        cls = self.enclosing(func, cst.ClassDef)
        if cls is not None and tape.startswith("self."):
            for method in self.nodes(cls, cst.FunctionDef):
                calls = [c for c in self.nodes(method, cst.Call) if self._is_self_call(c, func.name.value)]
                if method is not func and calls:
                    places.append((method, self.statement_of(calls[0])))
        for method, anchor in places:
            if any(self._calls(s, tape, ("zero", "reset")) for s in method.body.body):
                raise self.not_applicable(f"{method.name.value}() already calls {tape}.zero()")
            place = self._last_consumer(anchor, method.body)
            if place is None:
                continue
            where, in_arm = place
            self.insert_after(where, [self.statement(f"{tape}.zero()\n")])
            arm = " inside the consuming `if` arm" if in_arm else ""
            self.summary(f"zero after the last consumer: `{tape}.zero()` after the last gradient read in "
                         f"{method.name.value}() (line {self.pos(where).start.line}){arm}")
            return True
        return False

    def _zero_after_earlier_backward(self) -> bool:
        """``<tape>.zero()`` after the last gradient read that follows the earlier backward (data
        ``earlier_line``) in its own function, when that backward runs in no loop of its function."""
        line = self.data["earlier_line"]
        if not isinstance(line, int):
            return False
        calls = [c for c in self.nodes(self.tree, cst.Call) if call_name(c) == "backward"
                 and isinstance(c.func, cst.Attribute) and self.pos(c).start.line == line]
        if len(calls) != 1:
            return False
        func = self.enclosing(calls[0], cst.FunctionDef)
        loop = self.enclosing(calls[0], (cst.For, cst.While))
        if func is None or loop is not None and any(a is func for a in self.ancestors(loop)):
            return False
        tape = self.code(calls[0].func.value)
        if self._zero_between_backwards(self.statement_of(calls[0]), tape):
            return True
        if not self._zero_after_consumer(self.statement_of(calls[0]), func, tape):
            return False
        self.summary(f"zero after the earlier backward's consumer: the gradient left over comes from the backward "
                     f"at line {line}; `{tape}.zero()` after its last gradient read in {func.name.value}()")
        return True

    def _zero_between_backwards(self, earlier: cst.BaseStatement, tape: str) -> bool:
        """Two backwards of one tape in one block (``tape.backward(objective)`` ... ``tape.backward(volume)``,
        the second replaying the first's recording): ``<tape>.zero()`` after the last statement between them
        that reads a gradient, where the first one's gradient is done with."""
        block = list(self.block_of(earlier))
        later = [s for s in block if self.pos(s).start.line <= (self.line or 0) <= self.pos(s).end.line]
        if earlier not in block or len(later) != 1 or block.index(later[0]) <= block.index(earlier):
            return False
        between = block[block.index(earlier) + 1:block.index(later[0])]
        if any(self._calls(s, tape, ("zero", "reset")) for s in between):
            raise self.not_applicable(f"{tape} is already zeroed between the two backwards")
        names = cst_grad_locals(block)
        readers = [s for s in between if cst_reads_grad(s, names)]
        if not readers:
            return False
        self.insert_after(readers[-1], [self.statement(f"{tape}.zero()\n")])
        self.summary(f"zero between the backwards: `{tape}.zero()` after the last gradient read (line "
                     f"{self.pos(readers[-1]).start.line}) between the backward at line {self.pos(earlier).start.line} "
                     f"and this one, which replays the same recording")
        return True

    def _class_sets(self, func: cst.FunctionDef | None, attr: cst.Attribute) -> bool:
        """Whether a method of ``func``'s class assigns the first attribute of ``self.<a>...`` (True outside a class)."""
        first = attr
        while isinstance(first.value, cst.Attribute):
            first = first.value
        cls = self.enclosing(func, cst.ClassDef) if func is not None else None
        if cls is None:
            return True  # a plain function's `self` parameter: nothing to compare against
        for assign in self.nodes(cls, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
            for t in targets:
                if isinstance(t, cst.Attribute) and self.code(t.value) == "self" and t.attr.value == first.attr.value:
                    return True
        return False

    # -- helpers ----------------------------------------------------------------------------
    def _append_to_loop(self, loop: cst.For | cst.While, stmt: cst.BaseStatement) -> None:
        body = list(loop.body.body)
        last = body[-1]
        if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], (cst.Continue, cst.Break)):
            self.insert_before(last, [stmt])
        else:
            self.insert_after(last, [stmt])

    def _visible_names(self, func: cst.FunctionDef | None) -> set[str] | None:
        """Names bound in ``func`` (parameters, assignments) and at module level; None outside functions."""
        if func is None:
            return None
        names = {p.name.value for p in func.params.params}
        for scope in (func.body, self.tree):
            for assign in self.nodes(scope, (cst.Assign, cst.AnnAssign, cst.For)):
                targets = (
                    [t.target for t in assign.targets] if isinstance(assign, cst.Assign)
                    else [assign.target]
                )
                for target in targets:
                    names |= target_names(target)
        for node in self.nodes(self.tree, (cst.Import, cst.ImportFrom)):
            if isinstance(node.names, cst.ImportStar):
                return None
            for alias in node.names:
                names.add(self.code(alias.asname.name) if alias.asname else self.code(alias.name).split(".")[0])
        return names
