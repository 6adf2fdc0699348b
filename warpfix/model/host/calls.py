"""Calls of project code: functions, methods, constructors, ``super()``; inlining with its budgets.

What a constructor runs and where a method is found in a class and its bases:
:mod:`warpfix.model.host.classes`."""

from __future__ import annotations

import ast
from collections.abc import Callable

from warpfix.finding import Span
from warpfix.model.facts import Buffer
from warpfix.model.grad_reads import grad_owner
from warpfix.model.host.limits import CALL_STEPS, MAX_DEPTH
from warpfix.model.host.syntax import (
    _PURE_BUILTINS,
    _WARP_LIBRARIES,
    _asks_for_grad,
    _callee_name,
    _decorated,
    _is_super,
    _text,
)
from warpfix.model.host.values import DICT, Val, _CallBudget, _Frame, _Return
from warpfix.model.source import SourceFile

_INT_BUILTINS = {"min": min, "max": max, "abs": abs}  # of known ints, when the name is not rebound
#: standard-library classes whose instances are plain attribute bags: ``SimpleNamespace(x=..., n=3)`` holds its
#: keyword arguments as attributes, as a project class's ``__init__`` would
NAMESPACE_CLASSES = frozenset({"types.SimpleNamespace", "argparse.Namespace"})


class Calls:
    """Project calls of :class:`~warpfix.model.host.interpreter.HostInterpreter` (a mixin)."""

    # ------------------------------------------------------------------ calls
    def call(self, e: ast.Call, frame: _Frame) -> Val:
        src = frame.src
        wn = src.warp_name(e.func)
        if wn is not None:
            if self.library is not None and wn.split(".")[0] in _WARP_LIBRARIES:
                return self.library_call(f"warp.{wn}", e, frame)
            return self.warp_call(wn.rpartition(".")[2], e, frame)
        if isinstance(e.func, ast.Attribute):
            owner_node = grad_owner(e)
            if owner_node is not None:  # tape.gradients.get(x): x.grad
                for a in e.args[1:]:
                    self.eval(a, frame)
                return self.grad_read(self.attr(self.eval(owner_node, frame), "grad"), e, owner_node, src)
            return self.method_call(e, frame)
        callee = self.eval(e.func, frame)
        if callee.kind == "lib" and isinstance(callee.value, str):
            return self.library_call(callee.value, e, frame)
        args = [self.eval(a, frame) for a in e.args]
        kwargs = {kw.arg: self.eval(kw.value, frame) for kw in e.keywords if kw.arg}
        if callee.kind == "func" and callee.func is not None:
            fsrc, fn = callee.func
            bound = callee.attrs.get("__self__")
            if bound is not None:
                return self.inline(fsrc, fn, [bound, *args], kwargs, e, caller_src=src, bound_self=True)
            return self.inline(fsrc, fn, args, kwargs, e, caller_src=src, closure=callee.closure)
        if callee.kind == "class" and callee.cls is not None:
            return self.construct(callee, args, kwargs, e, src)
        if callee.kind == "struct":
            return self.new(callee.label + "()", "object", fresh=True, is_struct=True)
        if callee.kind == "unknown" and not args and self.imported_name(src, e.func) in NAMESPACE_CLASSES:
            ns = self.new(_callee_name(e.func) + "()", "object", fresh=True)
            ns.attrs.update(kwargs)
            return ns
        if (isinstance(e.func, ast.Name) and e.func.id == "zip" and callee.kind == "unknown" and args and not kwargs
                and all(a.kind == "list" and a.length is not None for a in args)):
            return self.zipped(args)
        if (isinstance(e.func, ast.Name) and e.func.id == "len" and callee.kind == "unknown" and len(args) == 1
                and args[0].kind == "list" and args[0].length is not None):
            return self.new("len()", "int", value=args[0].length)
        if (isinstance(e.func, ast.Name) and e.func.id in _INT_BUILTINS and callee.kind == "unknown" and not kwargs
                and len(args) >= (1 if e.func.id == "abs" else 2) and len(args) == len(e.args)
                and all(a.kind == "int" and type(a.value) is int for a in args)):
            fn = _INT_BUILTINS[e.func.id]  # ``last = min(first + SEGMENT, flock.steps)``
            return self.known_int(f"{e.func.id}()", fn(*(a.value for a in args)), tuple(args), fn)
        if isinstance(e.func, ast.Name) and e.func.id in _PURE_BUILTINS and callee.kind == "unknown":
            return self.new(f"{e.func.id}()")  # ``len(x)``, ``range(n)``: reads no values, writes nothing
        return self.opaque_call(e, args, kwargs, src)

    def imported_name(self, src: SourceFile, node: ast.expr) -> str | None:
        """The dotted name an absolute import binds ``node`` to (``SimpleNamespace`` after ``from types import
        SimpleNamespace``, ``types.SimpleNamespace`` after ``import types``), whatever the module; else None."""
        index, _ = self.module_index(src)
        if isinstance(node, ast.Name):
            entry = index.get(node.id)
            return f"{entry[1]}.{entry[3]}" if entry and entry[0] == "from" and not entry[2] else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            entry = index.get(node.value.id)
            return f"{entry[1]}.{node.attr}" if entry and entry[0] == "module" and not entry[2] else None
        return None

    def run_generator(self, callee: Val, call: ast.Call, args: list[Val], kwargs: dict[str, Val], frame: _Frame,
                      at_yield: Callable[[Val, Span], None]) -> None:
        """Run the project generator function ``callee`` (a ``@contextmanager`` or one a ``for`` consumes) as
        ``call`` calls it, ``at_yield`` running at each of its yields with the value yielded."""
        assert callee.func is not None
        fsrc, fn = callee.func
        self.yield_handlers.append((id(fn), at_yield))
        try:
            bound = callee.attrs.get("__self__")
            self.inline(fsrc, fn, [bound, *args] if bound is not None else args, kwargs, call, caller_src=frame.src,
                        bound_self=bound is not None, closure=callee.closure)
        finally:
            self.yield_handlers.pop()

    def zipped(self, lists: list[Val]) -> Val:
        """``zip(a, b)`` of lists of known length: a list of tuples, item ``k`` holding each list's item ``k``."""
        out = self.new("zip()", "list")
        out.length = min(v.length or 0 for v in lists)
        for k in range(out.length):
            row = self.new(f"zip()[{k}]", "list")
            for i, v in enumerate(lists):
                row.items[str(i)] = self.item(v, str(k))
            row.length = len(lists)
            out.items[str(k)] = row
        return out

    def opaque_call(self, e: ast.Call, args: list[Val], kwargs: dict[str, Val], src: SourceFile) -> Val:
        arrays = [v for v in [*args, *kwargs.values()] if v.buf is not None]
        if arrays:
            self.emit("call", e, src, reads=[v.buf for v in arrays if v.buf is not None],
                      detail={"callee": _callee_name(e.func)})
        return self.new(_callee_name(e.func) + "()")

    def grad_receiver(self, recv: ast.expr, frame: _Frame) -> Val | None:
        """The gradient ``recv`` names without reading it: ``x.grad``, ``tape.gradients[x]``, a local."""
        owner_node = grad_owner(recv)
        if owner_node is not None:
            return self.attr(self.eval(owner_node, frame), "grad")
        return frame.lookup(recv.id) if isinstance(recv, ast.Name) else None

    def method_call(self, e: ast.Call, frame: _Frame) -> Val:
        src = frame.src
        assert isinstance(e.func, ast.Attribute)
        name = e.func.attr
        recv_node = e.func.value
        # x.grad.zero_() / tape.gradients[x].fill_() / g.zero_() on a local bound to a gradient
        grad = self.grad_receiver(recv_node, frame) if name in ("zero_", "fill_", "assign") else None
        if grad is not None and grad.buf is not None and grad.buf.grad_of is not None:
            args = [self.eval(a, frame) for a in e.args]
            reads = [self.buffer(a) for a in args if a.buf is not None]
            self.emit("grad_zero", e, src, writes=[grad.buf], reads=reads,
                      names={grad.id: _text(recv_node)}, detail={"owner": grad.buf.grad_of.id, "method": name})
            return self.new("None", "const")
        if _is_super(recv_node) and frame.self_val is not None and frame.fn is not None:
            found = self.super_method(frame, name)
            if found is not None:
                args = [self.eval(a, frame) for a in e.args]
                kwargs = {kw.arg: self.eval(kw.value, frame) for kw in e.keywords if kw.arg}
                return self.inline(found[0], found[1], [frame.self_val, *args], kwargs, e, caller_src=src,
                                   bound_self=True)
        recv = self.eval(recv_node, frame)
        if recv.kind == "lib" and isinstance(recv.value, str):
            return self.library_call(f"{recv.value}.{name}", e, frame)
        if recv.lib_cls is not None and self.library is not None:
            return self.library_method(recv, name, e, frame)
        args = [self.eval(a, frame) for a in e.args]
        kwargs = {kw.arg: self.eval(kw.value, frame) for kw in e.keywords if kw.arg}
        recv_name = _text(recv_node)
        if recv.kind == "tape" and recv.tape is not None and name == "record_func":
            # the host step's own backward hands gradients to the arrays it names (none is overwritten)
            listed = e.args[1] if len(e.args) > 1 else next((k.value for k in e.keywords if k.arg == "arrays"), None)
            held = self.eval(listed, frame) if listed is not None else None
            items = [held.items.get(str(i)) for i in range(held.length or 0)] if held is not None and held.kind == "list" else []
            bufs = [self.buffer(v) for v in items if v is not None and v.kind not in ("int", "const")]
            if bufs:
                self.emit("record_func", e, src, reads=bufs, names={b.id: b.label for b in bufs})
            return self.new(f"{recv_name}.{name}()")
        if recv.kind == "tape" and recv.tape is not None:
            kind = {"backward": "backward", "zero": "tape_zero", "reset": "tape_reset"}.get(name)
            if kind is not None:
                reads = []
                names = {}
                loss = e.args[0] if e.args else next((k.value for k in e.keywords if k.arg == "loss"), None)
                grads = next((k.value for k in e.keywords if k.arg == "grads"), None)
                if loss is not None:
                    lv = self.eval(loss, frame)
                    reads.append(self.buffer(lv))
                    names[lv.id] = _text(loss)
                self.emit(kind, e, src, tape=recv.tape, reads=reads, names=names,  # type: ignore[arg-type]
                          detail={"loss": _text(loss) if loss is not None else None,
                                  "grads": grads is not None, "tape_name": recv_name})
            return self.new(f"{recv_name}.{name}()")
        if name in ("zero_", "fill_") and recv.kind not in ("list", "tape", "object", "class", "module"):
            buf = self.buffer(recv)
            self.emit("zero" if name == "zero_" else "fill", e, src, writes=[buf], names={buf.id: recv_name})
            return self.new("None", "const")
        if name == "assign" and args and recv.kind not in ("list", "tape", "class", "module"):
            buf = self.buffer(recv)
            srcs = [self.buffer(a) for a in args[:1] if a.kind not in ("int", "const")]
            names = {buf.id: recv_name}
            if srcs:
                names[srcs[0].id] = _text(e.args[0])
            self.emit("assign", e, src, writes=[buf], reads=srcs, names=names)
            return self.new("None", "const")
        if name in ("flatten", "reshape", "view") and recv.buf is not None and recv.kind == "array":
            v = self.new(f"{recv_name}.{name}()", "array")
            v.buf = Buffer(v.id, v.label, view_of=recv.buf, requires_grad=recv.buf.requires_grad)
            return v
        if name == "numpy" and recv.buf is not None:
            v = self.new(f"{recv_name}.numpy()")
            v.attrs["__host_of__"] = recv
            return v
        if name in ("keys", "values", "items") and not args and recv.kind == "list" and recv.label == DICT:
            return self.dict_view(recv, name)
        if name == "append" and recv.kind == "list" and args:
            recv.items[str(len(recv.items))] = args[0]
            if self.loop_stack and recv.factory is None and not isinstance(e.args[0], ast.Starred):
                # filled in a loop: an element the unrolled passes did not append (``states[t + 1]`` past
                # them) is built like the appended ones, not an unknown value
                recv.factory = (e.args[0], dict(frame.locals), src)
            if recv.length is not None:
                recv.length += 1
            return self.new("None", "const")
        # project method
        if recv.kind == "object" and recv.cls is not None:
            found = self.find_method(recv.cls, name)
            # ``self.helper(x)``: a @staticmethod gets no receiver, a @classmethod the class
            if found is not None and _decorated(found[1], "staticmethod"):
                return self.inline(found[0], found[1], args, kwargs, e, caller_src=src)
            if found is not None and _decorated(found[1], "classmethod"):
                cls_val = self.new(recv.cls[1].name, "class", cls=recv.cls)
                return self.inline(found[0], found[1], [cls_val, *args], kwargs, e, caller_src=src)
            if found is not None:
                return self.inline(found[0], found[1], [recv, *args], kwargs, e, caller_src=src, bound_self=True)
        if recv.kind == "class" and recv.cls is not None:
            found = self.find_method(recv.cls, name)
            if found is not None:
                return self.inline(found[0], found[1], args, kwargs, e, caller_src=src)
        if recv.kind == "module" and recv.module is not None:
            target = self.attr(recv, name)
            if target.kind == "func" and target.func is not None:
                return self.inline(target.func[0], target.func[1], args, kwargs, e, caller_src=src,
                                   closure=target.closure)
            if target.kind == "class" and target.cls is not None:
                return self.construct(target, args, kwargs, e, src)
            return self.opaque_call(e, args, kwargs, src)
        if recv.kind == "unknown" and not recv.attrs.get(name) and not recv.external:
            candidates = self.links.method_index.get(name, [])
            if len(candidates) == 1 and not name.startswith("__") and recv.buf is None:
                path, ckey, fkey = candidates[0]
                csrc = self.files[path]
                cnode, fn = csrc.definition_at(*ckey[1:]), csrc.definition_at(*fkey[1:])
                recv.kind = "object"
                recv.cls = (csrc, cnode)  # type: ignore[assignment]
                return self.inline(csrc, fn, [recv, *args], kwargs, e, caller_src=src, bound_self=True)
        out = self.opaque_call(e, args, kwargs, src)
        if recv.external:  # a method of something a library made (``model.state()``)
            out.external, out.grad_enabled = True, recv.grad_enabled or _asks_for_grad(e)
        return out

    def bind_params(self, fsrc: SourceFile, fn: ast.FunctionDef, args: list[Val], kwargs: dict[str, Val],
                    closure: tuple[dict[str, Val], ...] = ()) -> _Frame:
        """A frame for running ``fn`` with its parameters bound to ``args`` and ``kwargs`` (defaults for the rest);
        ``closure``: the enclosing functions' locals, where ``fn`` is a nested function."""
        frame = _Frame(fsrc, {}, fn=fn, closure=closure)
        params = [*fn.args.posonlyargs, *fn.args.args]
        defaults = fn.args.defaults
        n_no_default = len(params) - len(defaults)
        for i, p in enumerate(params):
            if i < len(args):
                frame.locals[p.arg] = args[i]
            elif p.arg in kwargs:
                frame.locals[p.arg] = kwargs[p.arg]
            elif i >= n_no_default:
                frame.locals[p.arg] = self.eval(defaults[i - n_no_default], _Frame(fsrc, {}))
            else:
                frame.locals[p.arg] = self.new(p.arg)
        for p, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True):
            frame.locals[p.arg] = kwargs.get(p.arg) or (self.eval(d, _Frame(fsrc, {})) if d else self.new(p.arg))
        if fn.args.vararg:
            rest = self.new(fn.args.vararg.arg, "list")
            for j, a in enumerate(args[len(params):]):
                rest.items[str(j)] = a
            frame.locals[fn.args.vararg.arg] = rest
        if fn.args.kwarg:
            frame.locals[fn.args.kwarg.arg] = self.new(fn.args.kwarg.arg)
        return frame

    def inline(self, fsrc: SourceFile, fn: ast.FunctionDef, args: list[Val], kwargs: dict[str, Val],
               site: ast.AST, caller_src: SourceFile | None = None, bound_self: bool = False,
               closure: tuple[dict[str, Val], ...] = ()) -> Val:
        if (fsrc.path, fn.lineno, fn.col_offset) not in self.effectful and not self.follow_all:
            returned = _accessor_return(fn)
            if returned is None or id(fn) in self.func_stack:
                return self.new(fn.name + "()")
            # ``def parameters(self): return [self.torque]``: what it returns, without running a call
            frame = self.bind_params(fsrc, fn, args, kwargs, closure)
            if bound_self and args:
                frame.self_val = args[0]
            self.call_stack.append(self.span_of(caller_src or fsrc, site))  # a ``.grad`` it reads is read here
            try:
                return self.eval(returned, frame)
            finally:
                self.call_stack.pop()
        if id(fn) in self.func_stack or len(self.func_stack) >= MAX_DEPTH or id(fn) in self.too_costly:
            return self.new(fn.name + "()")
        self.inlined.add(id(fn))
        frame = self.bind_params(fsrc, fn, args, kwargs, closure)
        if bound_self and args:
            frame.self_val = args[0]
        self.func_stack.append(id(fn))
        self.call_stack.append(self.span_of(caller_src or fsrc, site))
        limit = self.steps + CALL_STEPS
        self.call_limits.append(min(limit, self.call_limits[-1]) if self.call_limits else limit)
        try:
            self.block(fn.body, frame)
        except _Return:
            pass
        except _CallBudget:
            if self.steps <= limit:  # an enclosing call's budget ran out, not this one's
                raise
            # Too costly to follow (a model builder, a solver setup): the rest of this call and
            # every later call of the function are opaque, so the caller's own code is still seen.
            self.too_costly.add(id(fn))
            frame.returned = None
        finally:
            self.func_stack.pop()
            self.call_stack.pop()
            self.call_limits.pop()
        return frame.returned or self.new(fn.name + "()")


_ACCESSOR_NODES = (ast.Name, ast.Attribute, ast.List, ast.Tuple, ast.Constant, ast.Starred, ast.Load,
                   ast.expr_context)
_NOT_AN_ACCESSOR = ast.Pass()


def _accessor_return(fn: ast.FunctionDef) -> ast.expr | None:
    """The returned expression of a small accessor, ``def parameters(self): return [self.torque]``: a body
    (after its docstring) that is one ``return`` of names, attributes, constants and lists or tuples of
    those; no call, no loop, no comprehension, so evaluating it only reads values. None for any other
    function. Kept on the node (asked at every call of a function the interpreter does not inline)."""
    hit = fn.__dict__.get("_warpfix_accessor")
    if hit is None:
        body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(
            fn.body[0].value, ast.Constant) and isinstance(fn.body[0].value.value, str) else fn.body
        hit = _NOT_AN_ACCESSOR
        if (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None
                and not isinstance(fn, ast.AsyncFunctionDef)
                and not any(isinstance(d, ast.Name) and d.id == "contextmanager" for d in fn.decorator_list)
                and all(isinstance(n, _ACCESSOR_NODES) for n in ast.walk(body[0].value))):
            hit = body[0].value
        fn._warpfix_accessor = hit  # type: ignore[attr-defined]
    return None if hit is _NOT_AN_ACCESSOR else hit  # type: ignore[return-value]
