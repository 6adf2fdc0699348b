"""Host statements: assignments, loops, branches, with-blocks and the tape scopes they open.

How a loop is unrolled and recorded: :mod:`warpfix.model.host.loops`."""

from __future__ import annotations

import ast

from warpfix.finding import Span
from warpfix.model.facts import TapeScope
from warpfix.model.host.limits import MAX_STEPS
from warpfix.model.host.syntax import (
    _binop,
    _is_contextmanager,
    _is_main_guard,
    _text,
    _truthy,
)
from warpfix.model.host.values import (
    UNKNOWN_VARIES,
    Val,
    _Budget,
    _CallBudget,
    _Frame,
    _normalise_index,
    _Return,
)


class Statements:
    """Statements of :class:`~warpfix.model.host.interpreter.HostInterpreter` (a mixin)."""

    # ------------------------------------------------------------------ statements
    def block(self, body: list[ast.stmt], frame: _Frame, module_level: bool = False) -> None:
        """Run ``body``; after an ``if`` one arm of which returned, the rest runs in the other arm."""
        arms = 0
        try:
            for stmt in body:
                try:
                    rest = self.stmt(stmt, frame, module_level)
                except _Return:
                    raise
                except _Budget:
                    raise
                except RecursionError:
                    raise _Budget from None
                if rest is not None:
                    self.branch_stack.append(rest)
                    arms += 1
        finally:
            if arms:
                del self.branch_stack[-arms:]

    def stmt(self, s: ast.stmt, frame: _Frame, module_level: bool = False) -> tuple[int, int] | None:
        """Interpret ``s``; an ``if`` one arm of which returned gives the (if, arm) the code after it runs in."""
        src = frame.src
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Budget
        if self.call_limits and self.steps > self.call_limits[-1]:
            raise _CallBudget
        if isinstance(s, ast.Assign):
            value = self.eval(s.value, frame)
            for t in s.targets:
                self.assign(t, value, s.value, frame, s)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.assign(s.target, self.eval(s.value, frame), s.value, frame, s)
        elif isinstance(s, ast.AugAssign):
            cur = self.eval(s.target, frame)
            rhs = self.eval(s.value, frame)
            if cur.kind == "int" and rhs.kind == "int":
                new = _binop(s.op, cur.value, rhs.value)
                if new is not None:
                    op = s.op
                    v = self.known_int(_text(s.target), new, (cur, rhs), lambda a, b: _binop(op, a, b))
                    if self.loop_stack:
                        self.varying[v.id] = UNKNOWN_VARIES  # ``t += 1`` in a loop: a value of its own per pass
                    self.assign(s.target, v, s.value, frame, s)
        elif isinstance(s, ast.Expr):
            self.eval(s.value, frame)
        elif isinstance(s, ast.Return):
            frame.returned = self.eval(s.value, frame) if s.value is not None else self.new("None", "const")
            raise _Return
        elif isinstance(s, ast.If):
            if module_level and _is_main_guard(s.test):
                self.block(s.body, frame, module_level)
                return
            known = self.same_buffer_test(s.test, frame)
            if known is None:
                known = self.known_flag(s.test, frame)
            if known is None:
                known = self.none_test(s.test, frame)
            if known is None:  # ``if frame >= FRAMES // 2:``; the test is evaluated here, and only here
                known = self.test_truth(s.test, frame)
            if known is not None:  # ``if requires_grad:`` inside ``for requires_grad in (False, True)``
                self.block(s.body if known else s.orelse, frame, module_level)
                return
            if_id = next(self.ids)
            self.if_depth[if_id] = len(self.call_stack)
            returned = []
            for arm, body in ((0, s.body), (1, s.orelse)):
                if not body:
                    continue
                self.branch_stack.append((if_id, arm))
                try:
                    self.block(body, frame, module_level)
                except _Return:
                    returned.append(arm)
                finally:
                    if self.branch_stack and self.branch_stack[-1] == (if_id, arm):
                        self.branch_stack.pop()
            if len(returned) == 2:
                raise _Return
            if returned:  # ``if cached: return cached``: what follows runs when the arm did not return
                return if_id, 1 - returned[0]
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.for_loop(s, frame, module_level)
        elif isinstance(s, ast.While):
            self.while_loop(s, frame, module_level)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            self.with_stmt(s, frame, module_level)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            self.block(s.body, frame, module_level)
            self.block(s.orelse, frame, module_level)
            self.block(s.finalbody, frame, module_level)
        elif isinstance(s, ast.FunctionDef):
            if module_level and src.top_level(s):
                return  # top-level definitions are resolved on first use (module_global)
            k = self.kernels_by_file.get(src.path, {}).get(s.name)
            if k is not None and k.defined_at(s):
                frame.locals[s.name] = self.new(s.name, "kernel", kernel=k)
            else:
                closure = () if module_level else (frame.locals, *frame.closure)
                frame.locals[s.name] = self.new(s.name, "func", func=(src, s), closure=closure)
        elif isinstance(s, ast.ClassDef):
            if not module_level or not src.top_level(s):
                frame.locals[s.name] = self.new(s.name, "class", cls=(src, s))
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            if not module_level:
                self.local_import(s, frame)
        elif isinstance(s, ast.Delete):
            return

    def local_import(self, s: ast.Import | ast.ImportFrom, frame: _Frame) -> None:
        if isinstance(s, ast.ImportFrom):
            if s.module and s.module.split(".")[0] == "warp" and s.level == 0:
                return
            target = self.resolve_module(frame.src, s.module or "", s.level)
            for alias in s.names:
                if target is not None and alias.name != "*":
                    frame.locals[alias.asname or alias.name] = self.module_global(target, alias.name)

    def assign(self, target: ast.expr, value: Val, value_node: ast.expr, frame: _Frame, stmt: ast.stmt) -> None:
        src = frame.src
        if isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            if isinstance(value_node, (ast.Tuple, ast.List)) and len(value_node.elts) == len(elts):
                values = [value.items.get(str(i)) or self.item(value, str(i)) for i in range(len(elts))]
                arrays = [v for v in values if v.buf is not None or v.kind in ("array", "object", "unknown")]
                if len(arrays) >= 2 and all(
                    isinstance(e, (ast.Name, ast.Attribute, ast.Subscript)) for e in value_node.elts
                ):
                    self.emit(
                        "swap",
                        stmt,
                        src,
                        reads=[self.buffer(v) for v in values],
                        detail={"targets": [_text(e) for e in elts],
                                "sources": [_text(e) for e in value_node.elts]},
                    )
                for e, v in zip(elts, values, strict=True):
                    self.bind(e, v, frame)
            else:
                for i, e in enumerate(elts):
                    if isinstance(e, ast.Starred):
                        self.bind(e.value, self.new(_text(e.value), "list"), frame)
                    else:
                        self.bind(e, self.item(value, str(i)), frame)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)) and isinstance(
            value_node, (ast.Name, ast.Attribute, ast.Subscript)
        ) and value.kind in ("array", "object", "unknown"):
            self.emit(
                "rebind",
                stmt,
                src,
                reads=[self.buffer(value)],
                names={value.id: _text(value_node)},
                detail={"target": _text(target), "source": _text(value_node)},
            )
        if isinstance(target, ast.Attribute) and target.attr not in ("retain_grad", "requires_grad"):
            owner = self.eval(target.value, frame)
            if owner.is_struct and value.kind not in ("int", "const"):
                sb, fb = self.buffer(owner), self.buffer(value)
                self.emit("field_set", stmt, src, reads=[sb], writes=[fb],
                          names={sb.id: _text(target.value), fb.id: _text(value_node)},
                          detail={"target": _text(target), "field": target.attr})
        if isinstance(target, ast.Attribute) and target.attr == "retain_grad" and _truthy(value_node):
            obj = self.eval(target.value, frame)
            buf = self.buffer(obj)
            buf.retain_grad = src.span(stmt)
            self.emit("retain_grad", stmt, src, reads=[buf], names={buf.id: _text(target.value)})
        if isinstance(target, ast.Attribute) and target.attr == "requires_grad":
            obj = self.eval(target.value, frame)
            if isinstance(value_node, ast.Constant) and isinstance(value_node.value, bool):
                buf = self.buffer(obj)
                buf.requires_grad = value_node.value
                buf.requires_grad_explicit = True
            return
        if value.fresh and value.buf is not None and isinstance(target, (ast.Name, ast.Attribute)):
            if value.buf.label == value.label:
                value.buf.label = value.label = _text(target)
        if isinstance(target, ast.Subscript):
            base = self.eval(target.value, frame)
            if base.kind == "array" or (base.buf is not None and base.kind != "list"):
                # host write into an array's data (x.numpy()[i] = ...) is modelled at .numpy()
                return
        self.bind(target, value, frame)

    def bind(self, target: ast.expr, value: Val, frame: _Frame) -> None:
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, frame)
            obj.attrs[target.attr] = value
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value, frame)
            obj.items[_normalise_index(obj, self.index_key(target.slice, frame))] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, e in enumerate(target.elts):
                self.bind(e, self.item(value, str(i)), frame)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, value, frame)

    def with_stmt(self, s: ast.With | ast.AsyncWith, frame: _Frame, module_level: bool) -> None:
        src = frame.src
        if any(isinstance(i.context_expr, ast.Call) and src.is_warp(i.context_expr.func, "ScopedCapture")
               for i in s.items):
            # a graph capture records its body without running it (on CUDA and on the CPU): the work runs
            # at ``wp.capture_launch``, which programs pair with an eager fallback the model follows
            for item in s.items:
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, self.new(_text(item.context_expr)), frame)
            self.captured_backward = self.captured_backward or any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
                for n in ast.walk(s))
            return
        if len(s.items) == 1 and self.generator_with(s, frame, module_level):
            return
        scopes: list[TapeScope] = []
        for item in s.items:
            v = self.eval(item.context_expr, frame)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, v, frame)
            if v.kind == "tape" and v.tape is not None:
                scope = TapeScope(v.tape, next(self.ids), src.span(s))
                self.scope_depth[scope.instance] = len(self.call_stack)
                self.emit("tape_begin", s, src, tape=v.tape, scope=scope)
                self.tapes.append(scope)
                scopes.append(scope)
        try:
            self.block(s.body, frame, module_level)
        finally:
            for scope in reversed(scopes):
                self.tapes.remove(scope)
                end_node = s.body[-1] if s.body else s
                self.emit("tape_end", end_node, src, tape=scope.tape, scope=scope)

    def generator_with(self, s: ast.With | ast.AsyncWith, frame: _Frame, module_level: bool) -> bool:
        """``with helper() as tape:`` on a project ``@contextmanager``: the generator runs up to its
        ``yield``, the with-body runs there (inside whatever tape scope the generator opened, bound to
        the yielded value), then the generator's rest. False when the item is not such a call."""
        call = s.items[0].context_expr
        if not isinstance(call, ast.Call):
            return False
        callee = self.eval(call.func, frame)
        if callee.kind != "func" or callee.func is None or not _is_contextmanager(*callee.func):
            return False
        fsrc, fn = callee.func
        args = [self.eval(a, frame) for a in call.args]
        kwargs = {kw.arg: self.eval(kw.value, frame) for kw in call.keywords if kw.arg}
        target = s.items[0].optional_vars
        outer_limits = list(self.call_limits)  # the body is the caller's code: the caller's budget
        ran: list[BaseException | None] = []

        def body(value: Val, _where: Span | None = None) -> None:
            if ran:
                return
            ran.append(None)
            if target is not None:
                self.bind(target, value, frame)
            saved, self.call_limits = self.call_limits, outer_limits
            try:
                self.block(s.body, frame, module_level)
            except _Return as ret:  # the caller's ``return``: after the generator has finished
                ran[0] = ret
            finally:
                self.call_limits = saved

        self.run_generator(callee, call, args, kwargs, frame, body)
        if not ran:  # the generator was not followed to its yield: the body still runs
            body(self.new(_text(call)))
        if ran[0] is not None:
            raise ran[0]
        return True
