"""WF301: gradients summed over optimizer iterations for want of ``tape.zero()`` / ``tape.reset()``.

Strategies, tried in this order (the applied one is named in the report):

* **re-recorded tape** (finding data ``rerecorded``: the tape is re-entered every iteration
  without ``reset()``, so each backward replays the old launches too):
  in a loop, the loop's own ``<tape>.zero()`` becomes ``<tape>.reset()``, or ``<tape>.reset()``
  is added as the loop's last statement; with the backward in a function that is called from a
  loop elsewhere (``self.tape.backward(self.loss)`` in ``forward_backward()``),
  ``<tape>.reset()`` goes just before the function's ``with <tape>:`` block (the old recording and
  the consumed gradients are cleared before the new recording starts);
* **zero after consumption**: ``<tape>.zero()`` as the last statement of the innermost loop
  around the backward (before a trailing ``continue``/``break``);
* **zero before backward**: with ``arrays`` given (a tape that is fresh each iteration while
  persistent arrays keep their ``.grad``, or a backward outside any loop of its function),
  ``<array>.grad.zero_()`` just before the backward, for each array whose name the function
  can see;
* **zero after the consumer in the repeated method**: a ``self.<tape>`` whose backward sits in a
  method with no loop (``forward_backward()``, run by a library runner through ``step()``):
  ``self.<tape>.zero()`` right after the last statement that reads a ``.grad`` (the optimizer
  step), in that method or in the method of the same class that calls it -- newton's trainers'
  own shape.

Nothing changes a forward value: only gradient buffers are cleared, after their use.

Finding data (optional): ``tape`` -- the tape expression (default: the object whose
``.backward`` is called at the span); ``arrays`` -- list (or comma-separated text) of
array expressions whose ``.grad`` to zero before the backward; ``rerecorded`` -- true for a
tape re-entered without reset.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand, NotApplicable, call_name, dotted, target_names


class ZeroTape(FindingCommand):
    DESCRIPTION = "WF301: zero (or reset) the tape's gradients once per optimizer iteration."
    RULES = ("WF301",)
    DATA = {
        "tape": "the tape expression",
        "arrays": "arrays whose .grad to zero before the backward",
        "rerecorded": "the tape is re-entered every iteration without reset()",
    }

    def describe_missing(self) -> str:
        return "no `tape.backward(...)` call"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, lambda c: call_name(c) == "backward" and isinstance(c.func, cst.Attribute))
        assert isinstance(call.func, cst.Attribute)
        tape = self.data["tape"] or self.code(call.func.value)
        stmt = self.statement_of(call)
        loop = self.enclosing(call, (cst.For, cst.While))
        func = self.enclosing(call, cst.FunctionDef)
        if func is not None and loop is not None and not any(a is func for a in self.ancestors(loop)):
            loop = None  # a loop around the whole function definition is no loop of this backward
        rerecorded = self.data["rerecorded"] in (True, "true", "True", "1")
        if rerecorded:
            if loop is not None:
                return self._reset_in_loop(loop, tape)
            return self._reset_before_recording(stmt, tape)
        if loop is not None and isinstance(loop.body, cst.IndentedBlock):
            body = list(loop.body.body)
            if any(self._calls(s, tape, ("zero", "reset")) for s in body):
                raise self.not_applicable(f"the loop already calls {tape}.zero()")
            self._append_to_loop(loop, self.statement(f"{tape}.zero()\n"))
            self.summary("zero after consumption: `tape.zero()` at the end of the loop")
            return
        arrays = self.data["arrays"]
        if isinstance(arrays, str):
            arrays = [a.strip() for a in arrays.split(",") if a.strip()]
        arrays = list(dict.fromkeys(arrays or ()))  # one zero_() per array, however often it is named
        unnamed = "the finding names no array whose .grad to zero"
        if arrays:
            try:
                self._zero_before(stmt, list(arrays), func)
                return
            except NotApplicable as exc:
                unnamed = str(exc)
        if func is not None and tape.startswith("self.") and self._zero_after_consumer(stmt, func, tape):
            return
        raise self.not_applicable(
            f"the backward is not in a loop of its function, {unnamed}, and no statement of its method or "
            "of a method calling it reads a .grad after it"
        )

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
        """``<tape>.zero()`` after the last top-level statement that reads a ``.grad`` once the
        backward has run: in ``func`` itself, else in the methods of its class that call it."""
        cls = self.enclosing(func, cst.ClassDef)
        own = [s for s in func.body.body if s is backward or any(a is backward for a in self.nodes(s, type(backward)))]
        places: list[tuple[cst.FunctionDef, cst.BaseStatement]] = [(func, own[0])] if own else []
        if cls is not None:
            for method in self.nodes(cls, cst.FunctionDef):
                for s in method.body.body if method is not func else ():
                    if any(self._is_self_call(c, func.name.value) for c in self.nodes(s, cst.Call)):
                        places.append((method, s))
                        break
        for method, call_stmt in places:
            body = list(method.body.body)
            after = body[body.index(call_stmt) + 1:] if method is not func else body[body.index(call_stmt):]
            if any(self._calls(s, tape, ("zero", "reset")) for s in after):
                raise self.not_applicable(f"{method.name.value}() already calls {tape}.zero()")
            readers = [s for s in after if self._reads_grad(s)]
            if readers:
                self.insert_after(readers[-1], [self.statement(f"{tape}.zero()\n")])
                self.summary(f"zero after the consumer: `{tape}.zero()` after the last `.grad` read in "
                             f"{method.name.value}()")
                return True
        return False

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

    def _is_self_call(self, call: cst.Call, name: str) -> bool:
        f = call.func
        return isinstance(f, cst.Attribute) and f.attr.value == name and self.code(f.value) == "self"

    def _reads_grad(self, stmt: cst.CSTNode) -> bool:
        return any(a.attr.value == "grad" for a in self.nodes(stmt, cst.Attribute))

    # -- helpers ----------------------------------------------------------------------------
    def summary(self, text: str) -> None:
        self.context.scratch["summary"] = text

    def _append_to_loop(self, loop: cst.For | cst.While, stmt: cst.BaseStatement) -> None:
        body = list(loop.body.body)
        last = body[-1]
        if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], (cst.Continue, cst.Break)):
            self.insert_before(last, [stmt])
        else:
            self.insert_after(last, [stmt])

    def _calls(self, stmt: cst.CSTNode, tape: str, methods: tuple[str, ...]) -> list[cst.Call]:
        return [
            c for c in self.nodes(stmt, cst.Call)
            if call_name(c) in methods and isinstance(c.func, cst.Attribute) and self.code(c.func.value) == tape
        ]

    def _records(self, stmt: cst.With, tape: str) -> bool:
        for item in stmt.items:
            if self.code(item.item) == tape:
                return True
            if item.asname is not None and self.code(item.asname.name) == tape:
                return False  # `with wp.Tape() as tape:` makes a fresh tape: nothing old to replay
        return False

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
