"""WF301 tape zero: the strategies that clear the gradient outside the backward's own function.

A ``self.<tape>`` recorded in another method of the class (``<tape>.reset()`` before that method's
``with`` block), a function returning the gradient (``g.zero_()`` at each caller after its last read of
``g``), the backward's method called on an instance in a loop whose last gradient consumer is another
method of the class (``self.<tape>.zero()`` in that method), and a method whose loop zeroes the tape only
where it hands gradients on (``<instance>.<tape>.zero()`` at each loop calling it)
(:class:`CallerZero`, a base of :class:`codemods.wf301_tape_zero.ZeroTape`).
"""

from __future__ import annotations

import libcst as cst

from codemods._cst import method_call
from codemods._tape_reads import TapeReads
from warpfix.model.grad_reads import cst_grad_locals, cst_grad_owner, cst_reads_grad


class CallerZero(TapeReads):
    """Clearing the gradient at the backward's callers, the class's other methods and their instances."""

    def _reset_in_recording_method(self, backward: cst.BaseStatement, tape: str) -> bool:
        """``self.<tape>`` recorded by another method of the class than the backward's (``forward()`` holds
        the ``with self.tape:``, ``backward()`` the backward): ``<tape>.reset()`` just before that method's
        one ``with`` block, when the class records the tape nowhere else."""
        func = self.enclosing(backward, cst.FunctionDef)
        cls = self.enclosing(func, cst.ClassDef) if func is not None else None
        if cls is None or not tape.startswith("self."):
            return False
        withs = [w for w in self.nodes(cls, cst.With) if self._records(w, tape)]
        if len(withs) != 1:
            return False
        method = self.enclosing(withs[0], cst.FunctionDef)
        if method is None or withs[0] not in method.body.body:
            return False
        if any(self._calls(s, tape, ("reset",)) for s in method.body.body[: list(method.body.body).index(withs[0])]):
            raise self.not_applicable(f"{tape} is already reset in {method.name.value}() before it records")
        self.insert_before(withs[0], [self.statement(f"{tape}.reset()\n")])
        self.summary(f"re-recorded tape: `{tape}.reset()` before {method.name.value}() records it")
        return True

    def _zero_at_caller(self, func: cst.FunctionDef) -> bool:
        """A function returning the gradient (``return tape.gradients[x]``, ``return x.grad``): at each
        caller that binds the result to a name (``g = f(...)``), ``g.zero_()`` after the last read of ``g``.
        ``g`` is the gradient array itself, so this clears what the next backward adds to, after its use."""
        returns = [r for r in self.nodes(func, cst.Return) if self.enclosing(r, cst.FunctionDef) is func]
        grad_locals = cst_grad_locals(func.body.body)
        if not returns or not all(r.value is not None and (cst_grad_owner(r.value) is not None or (
                isinstance(r.value, cst.Name) and r.value.value in grad_locals)) for r in returns):
            return False
        cls = self.enclosing(func, cst.ClassDef)
        name = func.name.value
        edits = []
        for call in self.nodes(self.tree, cst.Call):
            f = call.func
            if not (self._is_self_call(call, name) if cls is not None else isinstance(f, cst.Name) and f.value == name):
                continue
            assign = self.parent(call)
            if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1
                    and isinstance(assign.targets[0].target, cst.Name)):
                raise self.not_applicable(f"a call of {name}() at line {self.pos(call).start.line} does not bind the "
                                          "returned gradient to a name: where it is consumed is not followed")
            caller = self.enclosing(call, cst.FunctionDef)
            scope = self.enclosing(call, (cst.For, cst.While)) or caller
            bound = assign.targets[0].target.value
            place = self._last_consumer(self.statement_of(call), scope.body if scope else self.tree, {bound})
            if place is None:
                raise self.not_applicable(f"the gradient {name}() returns at line {self.pos(call).start.line} is not "
                                          "read after the call")
            edits.append((place[0], bound))
        for where, bound in edits:
            self.insert_after(where, [self.statement(f"{bound}.zero_()\n")])
        if edits:
            self.summary(f"zero at the caller: {name}() returns the gradient array; `<name>.zero_()` after its last "
                         f"use at {len(edits)} call site(s)")
        return bool(edits)

    def _zero_in_consuming_method(self, func: cst.FunctionDef, tape: str) -> bool:
        """The backward's method is called on an instance in a loop outside the class (``trainer.backward()``)
        and the loop's last gradient consumer after it is another method of the class (``trainer.step()``,
        the optimizer step): ``self.<tape>.zero()`` after that method's last gradient read, when every call of
        it in the file is such a last consumer (so it always runs after a backward, with the tape made)."""
        cls = self.enclosing(func, cst.ClassDef)
        if cls is None:
            return False
        methods = {m.name.value: m for m in cls.body.body if isinstance(m, cst.FunctionDef)}
        consuming = {name for name, m in methods.items() if m is not func and cst_reads_grad(m.body)}
        instances = self._instances(cls)
        lasts: list[cst.BaseStatement] = []
        names: set[str] = set()  # the consuming method each loop ends with
        for call, instance, loop in self._instance_calls(instances, func.name.value):
            stmt = self.statement_of(call)
            if loop is None or not isinstance(loop.body, cst.IndentedBlock) or stmt not in loop.body.body:
                return False
            after = list(loop.body.body)[list(loop.body.body).index(stmt) + 1:]
            readers = [s for s in after if cst_reads_grad(s) or self._consuming_call(s, instance, consuming)]
            last = self._consuming_call(readers[-1], instance, consuming) if readers else None
            if last is None:
                return False
            lasts.append(readers[-1])
            names.add(last)
        if not lasts or len(names) != 1:
            return False
        name = names.pop()
        # any ``<name>.<method>(...)``: an instance handed to a helper (``run(example)``) calls it too
        calls = [c for c in self.nodes(self.tree, cst.Call)
                 if isinstance(c.func, cst.Attribute) and c.func.attr.value == name and isinstance(c.func.value, cst.Name)]
        if any(self.statement_of(c) not in lasts for c in calls):
            return False  # also run where no backward precedes it
        method = methods[name]
        if any(self._calls(s, tape, ("zero", "reset")) for s in method.body.body):
            raise self.not_applicable(f"{name}() already calls {tape}.zero()")
        readers = [s for s in method.body.body if cst_reads_grad(s)]
        if not readers or self.nodes(readers[-1], cst.Return):
            return False
        self.insert_after(readers[-1], [self.statement(f"{tape}.zero()\n")])
        self.summary(f"zero in the consuming method: `{tape}.zero()` after the last gradient read in {name}() "
                     f"(line {self.pos(readers[-1]).start.line}), which every loop calling {func.name.value}() "
                     "runs as its last gradient consumer")
        return True

    def _instances(self, cls: cst.ClassDef) -> set[str]:
        """Names the file binds to an instance of ``cls``: ``example = Example(...)``, and the parameter of a
        module-level function of the file that a call hands such an instance (``train(Example(), ...)`` or
        ``train(example, ...)`` with ``def train(trainer, ...)``: a library-style runner)."""
        def made(node: cst.BaseExpression) -> bool:
            return isinstance(node, cst.Call) and self.code(node.func) == cls.name.value

        names = {
            t.target.value for a in self.nodes(self.tree, cst.Assign) for t in a.targets
            if isinstance(t.target, cst.Name) and made(a.value)
        }
        runners = {f.name.value: f for f in self.tree.body if isinstance(f, cst.FunctionDef)}
        for call in self.nodes(self.tree, cst.Call):
            runner = runners.get(call.func.value) if isinstance(call.func, cst.Name) else None
            if runner is None:
                continue
            params = list(runner.params.params)
            for k, arg in enumerate(call.args):
                if arg.keyword is None and k < len(params) and (
                        made(arg.value) or isinstance(arg.value, cst.Name) and arg.value.value in names):
                    names.add(params[k].name.value)
        return names

    def _instance_calls(self, instances: set[str], name: str) -> list[tuple[cst.Call, str, cst.For | cst.While | None]]:
        """Each call ``<instance>.<name>(...)`` in the file: (call, instance, innermost loop around it)."""
        out = []
        for call in self.nodes(self.tree, cst.Call):
            f = call.func
            if isinstance(f, cst.Attribute) and f.attr.value == name and isinstance(f.value, cst.Name) and (
                    f.value.value in instances):
                loop = next((a for a in self.ancestors(call) if isinstance(a, (cst.For, cst.While))), None)
                out.append((call, f.value.value, loop))
        return out

    def _consuming_call(self, stmt: cst.BaseStatement, receiver: str, consuming: set[str]) -> str | None:
        """The method name when ``stmt`` is just ``<receiver>.<m>(...)`` for a gradient-consuming method m."""
        call = method_call(stmt, *consuming) if consuming else None
        if call is None or not (isinstance(call.func.value, cst.Name) and call.func.value.value == receiver):
            return None
        return call.func.attr.value

    def _zero_at_method_callers(self, func: cst.FunctionDef, tape: str) -> bool:
        """The method's own loop already zeroes ``self.<tape>`` where it hands gradients on (checkpoint
        segments), and what it leaves is its caller's to consume: at each loop that calls it on an instance
        of its class (``example = Example(...)``; ``for ...: example.backward()``), ``example.<tape>.zero()``
        after the loop's last gradient read (the optimizer step)."""
        cls = self.enclosing(func, cst.ClassDef)
        if cls is None:
            return False
        edits = []
        for call, instance, loop in self._instance_calls(self._instances(cls), func.name.value):
            if loop is None or not isinstance(loop.body, cst.IndentedBlock):
                continue
            there = instance + tape[len("self"):]
            if any(self._calls(s, there, ("zero", "reset")) for s in loop.body.body):
                return False
            place = self._last_consumer(self.statement_of(call), loop.body)
            if place is not None:
                edits.append((place[0], there))
        for where, there in edits:
            self.insert_after(where, [self.statement(f"{there}.zero()\n")])
        if edits:
            self.summary(f"zero at the method's caller: {func.name.value}() zeroes {tape} only where it hands "
                         f"gradients on; `{edits[0][1]}.zero()` after the caller's last gradient read")
        return bool(edits)
