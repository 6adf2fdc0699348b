"""Host loops: ``for`` and ``while`` unrolled over a few passes, the values their counter or items
take in each pass (and how those vary between passes), and the :class:`~warpfix.model.facts.Loop`
recorded for each."""

from __future__ import annotations

import ast

from warpfix.finding import Span
from warpfix.model.facts import Loop
from warpfix.model.host.limits import LOOP_UNROLL, MAX_PERIOD, MAX_UNROLLED_LOOPS, UNKNOWN_START_STRIDE
from warpfix.model.host.syntax import _is_contextmanager, _is_enumerate, _is_place, _passes, _text
from warpfix.model.host.values import DICT, UNKNOWN_VARIES, Val, Varies, _Frame, _Return
from warpfix.model.source import SourceFile


class Loops:
    """Loops of :class:`~warpfix.model.host.interpreter.HostInterpreter` (a mixin)."""

    def for_loop(self, s: ast.For | ast.AsyncFor, frame: _Frame, module_level: bool) -> None:
        if self.generator_for(s, frame, module_level):
            return
        src = frame.src
        it = self.eval(s.iter, frame)
        if it.kind == "list" and it.label == DICT:
            it = self.dict_view(it, "keys")
        start, step = 0, 1
        is_range = isinstance(s.iter, ast.Call) and isinstance(s.iter.func, ast.Name) and s.iter.func.id == "range"
        run = max(LOOP_UNROLL, self.period(s, frame) + 1) if self.unroll_count() > 1 else 1
        passes = list(range(run))
        # the counter's values at every iteration (None: not known), and whether those bound are its values
        every: range | None = None
        exact = True
        if is_range:
            args = [self.eval(a, frame) for a in s.iter.args]  # type: ignore[union-attr]
            if len(args) >= 2 and args[0].kind == "int":
                start = args[0].value  # type: ignore[assignment]
            elif len(args) >= 2:
                start = self.unknown_start(args[0])
            if len(args) == 3 and args[2].kind == "int":
                step = args[2].value  # type: ignore[assignment]
            exact = (len(args) < 2 or args[0].kind == "int") and (len(args) < 3 or args[2].kind == "int")
            if args and all(a.kind == "int" for a in args):
                try:
                    every = range(*[a.value for a in args])  # type: ignore[misc]
                except (TypeError, ValueError):
                    every = None
                if every is not None:
                    passes = _passes(len(every), run)
                if any(a.id in self.varying for a in args):
                    every = None  # bounds that vary between the passes of an enclosing loop
        elif it.kind == "list" and it.length is not None:
            passes = _passes(it.length, run)
        elif _is_enumerate(s.iter):
            inner = self.eval(s.iter.args[0], frame)  # type: ignore[union-attr]
            if inner.kind == "list" and inner.length is not None:
                passes = _passes(inner.length, run)
                every = range(inner.length)
            exact = len(s.iter.args) == 1 and not s.iter.keywords  # type: ignore[union-attr]  # no ``start``
        # a counter that does not take every value it has over the loop's iterations varies between passes
        counter: Varies | None = None
        if not exact:
            counter = UNKNOWN_VARIES
        elif (is_range or _is_enumerate(s.iter)) and (every is None or len(passes) < len(every)):
            counter = Varies(next(self.ids), tuple(start + k * step for k in passes), every)
        loop_id = next(self.ids)
        n_before = len(self.events)
        var = s.target.id if isinstance(s.target, ast.Name) else None
        for pass_no, k in enumerate(passes):
            if is_range:
                v = self.new(var or "_", "int", value=start + k * step)
                if counter is not None:
                    self.varying[v.id] = counter
            elif _is_enumerate(s.iter):
                inner = self.eval(s.iter.args[0], frame)  # type: ignore[union-attr]
                v = self.new("enum", "list")
                v.items["0"] = self.new("i", "int", value=k)
                if counter is not None:
                    self.varying[v.items["0"].id] = counter
                v.items["1"] = self.item(inner, str(k)) if inner.kind == "list" else self.new(f"{inner.label}[{k}]")
            elif it.kind == "list":
                v = self.item(it, str(k))
                if v.kind == "int" and len(passes) < (it.length or 0):
                    # ``for n in (1, 2, 4, 8, 16)``: this pass's copy of the item varies between passes
                    v = self.new(v.label, "int", value=v.value)
                    self.varying[v.id] = _item_values(it, passes, next(self.ids))
            else:
                v = self.new(f"{_text(s.target)}#{k}")
            self.bind(s.target, v, frame)
            self.loop_stack.append((loop_id, pass_no))
            try:
                self.block(s.body, frame, module_level)
            finally:
                self.loop_stack.pop()
        self.block(s.orelse, frame, module_level)
        self.record_loop(loop_id, s, src, var, n_before)

    def generator_for(self, s: ast.For | ast.AsyncFor, frame: _Frame, module_level: bool) -> bool:
        """``for it, loss in optimize(...)`` over a project generator function: the generator runs, and the
        loop's body runs at each of its yields, bound to the value yielded (the caller's optimizer step lands
        between the generator's backward and what follows its ``yield``, its ``tape.zero()``). The body's
        events take the passes of the generator's own loops. False when the iterable is not such a call."""
        call = s.iter
        if not isinstance(call, ast.Call):
            return False
        callee = self.eval(call.func, frame)
        if callee.kind != "func" or callee.func is None:
            return False
        fsrc, fn = callee.func
        if _is_contextmanager(fsrc, fn) or not _yields(fn):
            return False
        args = [self.eval(a, frame) for a in call.args]
        kwargs = {kw.arg: self.eval(kw.value, frame) for kw in call.keywords if kw.arg}
        outer_limits = list(self.call_limits)  # the body is the caller's code: the caller's budget and stack
        outer_stack = list(self.call_stack)
        returned: list[_Return] = []
        ran: list[bool] = []

        def body(value: Val, where: Span | None = None) -> None:
            if returned:  # the caller returned from inside the loop: the generator is not resumed
                return
            ran.append(True)
            self.bind(s.target, value, frame)
            saved, self.call_limits = self.call_limits, outer_limits
            saved_stack, self.call_stack = self.call_stack, outer_stack
            if where is not None:
                self.resumed.append(where)
            try:
                self.block(s.body, frame, module_level)
            except _Return as ret:
                returned.append(ret)
            finally:
                self.call_limits, self.call_stack = saved, saved_stack
                if where is not None:
                    self.resumed.pop()

        self.run_generator(callee, call, args, kwargs, frame, body)
        if not ran:  # the generator was not followed to a yield: the body still runs, once
            body(self.new(_text(call)))
        if returned:
            raise returned[0]
        self.block(s.orelse, frame, module_level)
        return True

    def while_loop(self, s: ast.While, frame: _Frame, module_level: bool) -> None:
        loop_id = next(self.ids)
        n_before = len(self.events)
        for k in range(self.unroll_count()):
            self.eval(s.test, frame)
            self.loop_stack.append((loop_id, k))
            try:
                self.block(s.body, frame, module_level)
            finally:
                self.loop_stack.pop()
        self.record_loop(loop_id, s, frame.src, None, n_before)

    def unknown_start(self, start: Val) -> int:
        """A stand-in for a ``range`` start the interpreter cannot evaluate (``range(t0, t0 + n)``, ``t0`` from a
        window index it does not know): far from any real index and from every other unknown start, so the
        counter names the same list elements wherever the same start value is used, and other elements where
        another one is (the windows of a rollout each start where the last ended)."""
        base = self.unknown_starts.get(start.id)
        if base is None:
            base = self.unknown_starts[start.id] = UNKNOWN_START_STRIDE * (len(self.unknown_starts) + 1)
        return base

    def unroll_count(self) -> int:
        return LOOP_UNROLL if len(self.loop_stack) < MAX_UNROLLED_LOOPS else 1

    def period(self, loop: ast.For | ast.AsyncFor, frame: _Frame) -> int:
        """The largest ``k`` (up to :data:`MAX_PERIOD`) of an ``expr % k`` in the loop's own body, ``k`` a
        literal or a name or attribute chain holding a known int (``states[t % n]``); else 0."""
        nodes = self.loop_nodes.get(id(loop))
        if nodes is None:
            nodes = self.loop_nodes[id(loop)] = [n for stmt in loop.body for n in ast.walk(stmt)]
        found = 0
        for node in nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _is_place(node.right):
                k = node.right.value if isinstance(node.right, ast.Constant) else self.eval(node.right, frame).value
                if isinstance(k, int) and not isinstance(k, bool) and found < k <= MAX_PERIOD:
                    found = k
        return found

    def record_loop(self, loop_id: int, node: ast.For | ast.AsyncFor | ast.While, src: SourceFile,
                    var: str | None, n_before: int) -> None:
        inside = self.events[n_before:]
        self.loops[loop_id] = Loop(
            loop_id,
            src.span(node),
            node,  # type: ignore[arg-type]
            var,
            contains_backward=any(e.kind == "backward" for e in inside),
            contains_tape=any(e.kind == "tape_begin" for e in inside),
        )


def _yields(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``fn`` is a generator function: a ``yield`` in its own body (not in a nested def or lambda)."""
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _item_values(xs: Val, passes: list[int], base: int) -> Varies:
    """How the items of list ``xs`` bound by a loop's passes vary: known when every item is a known int."""
    values = [xs.items.get(str(k)) for k in range(xs.length or 0)]
    ints = tuple(v.value for v in values if v is not None and v.kind == "int" and type(v.value) is int)
    if len(ints) != len(values):
        return UNKNOWN_VARIES
    return Varies(base, tuple(ints[k] for k in passes), ints)
