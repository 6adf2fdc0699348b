"""Calls into installed Warp-based packages: their effect summaries replayed at the call site."""

from __future__ import annotations

import ast

from warpfix.model.facts import Buffer
from warpfix.model.host import library_callbacks
from warpfix.model.host.syntax import _asks_for_grad, _is_property, _is_static, _keyword_holds, _text
from warpfix.model.host.values import Val, _Frame, _holds_array, _SameItem
from warpfix.model.library import LibraryIndex
from warpfix.model.library_summary import Op, Summary, parse_path
from warpfix.model.source import SourceFile


class LibraryCalls:
    """Library calls of :class:`~warpfix.model.host.interpreter.HostInterpreter` (a mixin)."""

    # ------------------------------------------------------------------ installed libraries
    def library_call(self, dotted: str, e: ast.Call, frame: _Frame) -> Val:
        """A call of a function or class of an installed package: replay the function's effect summary;
        a class gives an instance whose method calls replay theirs."""
        src = frame.src
        args = [self.eval(a, frame) for a in e.args]
        kwargs = {kw.arg: self.eval(kw.value, frame) for kw in e.keywords if kw.arg}
        assert self.library is not None
        target = self.library.resolve(dotted)
        label = dotted.rpartition(".")[2]
        grad = _asks_for_grad(e)
        if target is not None and target[0] == "class" and isinstance(target[2], ast.ClassDef):
            obj = self.new(label + "()", "object", fresh=True, lib_cls=(target[1], target[2]), external=True,
                           grad_enabled=grad)
            found = _library_classes(self.library).find_method(obj.lib_cls, "__init__")  # type: ignore[arg-type]
            if found is not None:
                summary = self.library.summary(found[0], found[1], f"{dotted}.__init__", is_method=True)
                if summary is not None:
                    self.apply_summary(summary, [obj, *args], ["self", *(_text(a) for a in e.args)], kwargs, e, frame)
            return obj
        if target is not None and target[0] == "def" and isinstance(target[2], ast.FunctionDef):
            summary = self.library_summary(target[1], target[2], dotted, False, [*args, *kwargs.values()])
            if summary is not None:
                texts = [_text(a) for a in e.args]
                out = self.apply_summary(summary, args, texts, kwargs, e, frame)
                out.grad_enabled = grad
                return out
        self.opaque_call(e, args, kwargs, src)
        return self.new(label + "()", external=True, grad_enabled=grad)

    def library_summary(self, src: SourceFile, fn: ast.FunctionDef, qualname: str, is_method: bool,
                        args: list[Val]) -> Summary | None:
        """The call's effect summary. Outside any tape, a call handed no array (model builders,
        collision set-up) only matters for what the library calls back (a runner's ``example.step()``):
        its array effects are not derived, which keeps a cold check fast."""
        assert self.library is not None
        if not self.tapes and not any(_holds_array(a) for a in args):
            params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
            receiver = params[0] if is_method and params else None
            targets = tuple(p for p in params if p != receiver)
            key = (src.path, fn.lineno, targets)
            ops = self.library.callbacks.get(key)
            if ops is None:
                ops = self.library.callbacks[key] = library_callbacks.callback_ops(src, fn, list(targets))
            return Summary(qualname, params, list(ops))
        return self.library.summary(src, fn, qualname, is_method)

    def library_method(self, recv: Val, name: str, e: ast.Call, frame: _Frame) -> Val:
        assert self.library is not None and recv.lib_cls is not None and isinstance(e.func, ast.Attribute)
        args = [self.eval(a, frame) for a in e.args]
        kwargs = {kw.arg: self.eval(kw.value, frame) for kw in e.keywords if kw.arg}
        found = _library_classes(self.library).find_method(recv.lib_cls, name)
        grad = recv.grad_enabled or _asks_for_grad(e)
        if found is not None and not _is_property(found[1]) and not _is_static(found[1]):
            qual = f"{found[0].module_name}.{recv.lib_cls[1].name}.{name}"
            summary = self.library_summary(found[0], found[1], qual, True, [*args, *kwargs.values()])
            if summary is not None:
                texts = [_text(e.func.value), *(_text(a) for a in e.args)]
                out = self.apply_summary(summary, [recv, *args], texts, kwargs, e, frame)
                out.grad_enabled = grad
                return out
        self.opaque_call(e, args, kwargs, frame.src)
        return self.new(f"{recv.label}.{name}()", external=True, grad_enabled=grad)

    def apply_summary(self, summary: Summary, args: list[Val], texts: list[str], kwargs: dict[str, Val],
                      e: ast.Call, frame: _Frame) -> Val:
        """Replay a library call's ops on the caller's values, as events at the call site."""
        src = frame.src
        assert self.library is not None
        bound: dict[str, tuple[Val, str]] = {}
        for i, pname in enumerate(summary.params):
            if i < len(args):
                bound[pname] = (args[i], texts[i])
        kw_text = {k.arg: _text(k.value) for k in e.keywords if k.arg}
        for k, v in kwargs.items():
            bound.setdefault(k, (v, kw_text.get(k, k)))
        # the caller's text for an entry of a dict literal it passes (``values={"k": x}``: ``x``)
        entry_text = {
            (_text(node), str(key.value)): _text(val)
            for node in [*e.args, *(k.value for k in e.keywords)] if isinstance(node, ast.Dict)
            for key, val in zip(node.keys, node.values, strict=True) if isinstance(key, ast.Constant)
        }
        fresh: dict[str, Val] = {}
        call_id = next(self.ids)

        def resolve(path: str, any_kind: bool = False) -> tuple[Val, str] | None:
            path, dofs = (path[:-5], True) if path.endswith(":dofs") else (path, False)
            if dofs:  # a warp.fem field's dof array, or the plain array the caller passed instead
                hit = resolve(path, any_kind=True)
                if hit is None or hit[0].kind == "array" or hit[0].buf is not None:
                    return hit if hit is None or not hit[0].kind == "list" else None
                return resolve(f"{path}.dof_values")
            if path.startswith("new:"):
                v = fresh.get(path)
                if v is None:
                    v = fresh[path] = self.new(f"{summary.qualname.rpartition('.')[2]}:{path}", "array", fresh=True)
                    v.buf = Buffer(v.id, v.label, fresh=True)
                return v, v.label
            root, steps = parse_path(path)
            hit = bound.get(root)
            if hit is None:
                return None
            v, text = hit
            for kind, key in steps:
                if v.kind in ("int", "const", "lib", "module", "class", "func", "kernel", "tape"):
                    return None
                v = self.attr(v, key) if kind == "attr" else self.item(v, key)
                text = f"{text}.{key}" if kind == "attr" else entry_text.get((text, key), f"{text}[{key}]")
            if not any_kind and v.kind in ("int", "const", "lib", "module", "class", "func", "kernel", "tape", "list"):
                return None
            return v, text

        receiver = args[0] if summary.qualname.endswith("__init__") or (args and args[0].lib_cls is not None) else None
        self_name = summary.params[0] if receiver is not None and summary.params else None
        for attr, path in summary.binds.items():
            hit = resolve(path, any_kind=True)
            if receiver is not None and hit is not None:
                receiver.attrs[attr] = hit[0]
                receiver.bound_attrs |= {attr}

        def private(path: str) -> bool:
            """A write to the library object's own state, not to something the caller handed it."""
            if self_name is None or receiver is None:
                return False
            root, steps = parse_path(path)
            return root == self_name and not (steps and steps[0][1] in receiver.bound_attrs)

        def expand(paths: list[str]) -> list[str]:
            """``[*]`` steps replaced by each key of the dict or list the caller passed there."""
            out: list[str] = []
            for path in paths:
                head, star, tail = path.partition("[*]")
                if not star:
                    out.append(path)
                    continue
                hit = resolve(head, any_kind=True)
                if hit is not None and hit[0].kind == "list" and not isinstance(hit[0].items, _SameItem):
                    out.extend(expand([f"{head}[{key}]{tail}" for key in hit[0].items]))
            return out

        # the ops' paths resolved once per call: the ops below bind no attribute, so a path keeps its value
        resolved: dict[str, tuple[Val, str] | None] = {}

        def resolve_once(path: str) -> tuple[Val, str] | None:
            if path not in resolved:
                resolved[path] = resolve(path)
            return resolved[path]

        callbacks: list[Op] = []
        for op in summary.ops:
            if op.kind == "callback":
                callbacks.append(op)
                continue
            if op.when and not all(_keyword_holds(e, w, len(args), summary.params) for w in op.when.split(",")):
                continue
            names: dict[int, str] = {}
            paths: dict[int, str] = {}

            def buf_of(path: str, names: dict[int, str] = names, paths: dict[int, str] = paths) -> Buffer | None:
                hit = resolve_once(path)
                if hit is None:
                    return None
                b = self.buffer(hit[0])
                names.setdefault(b.id, hit[1])
                paths.setdefault(b.id, path)
                return b

            kernel = (self.own_kernels.get(*op.kernel) or self.library.kernel(*op.kernel)) if op.kernel else None
            reads: list[Buffer] = []
            writes: list[Buffer] = []
            accums: list[Buffer] = []
            binding: dict[str, Buffer] = {}
            param_paths: dict[str, str] = {}
            param_text: dict[str, str] = {}
            if kernel is not None:
                for pname, path in op.binding.items():
                    facts = kernel.params.get(pname)
                    b = buf_of(path) if facts is not None and facts.is_array else None
                    if b is None or facts is None or (facts.modified and private(path)):
                        continue
                    binding[pname] = b
                    param_paths[pname] = path
                    param_text[pname] = resolve_once(path)[1]  # type: ignore[index]
                    for lst, hit in ((reads, facts.read), (writes, facts.written), (accums, facts.accumulated)):
                        if hit and all(x.id != b.id for x in lst):
                            lst.append(b)
            else:
                for lst, ps in ((reads, op.reads), (writes, op.writes), (accums, op.accums)):
                    for path in expand(ps):
                        b = buf_of(path) if lst is reads or not private(path) else None
                        if b is not None and all(x.id != b.id for x in lst):
                            lst.append(b)
            if not (reads or writes or accums):
                continue
            kind = op.kind if op.kind in ("launch", "copy", "assign", "clone", "zero", "fill") else "launch"
            self.emit(kind, e, src, reads=reads, writes=writes, accums=accums, names=names,  # type: ignore[arg-type]
                      kernel=kernel, binding=binding,
                      detail={"kernel": op.kernel_name or summary.qualname.rpartition(".")[2],
                              "library": summary.qualname, "lib_call": call_id, "lib_paths": paths,
                              "param_paths": param_paths, "param_text": param_text,
                              **({"conditional": True} if op.conditional else {})})
        if callbacks:
            self.replay_callbacks(callbacks, bound, e, src)
        result = None
        for path in summary.returns:
            hit = resolve(path)
            if hit is not None:
                result = hit[0]
                break
        # the two recursive closures hold themselves (and through ``bound`` the caller's values) in a
        # cycle that only the collector, paused while tracing, would free: let them go now
        resolve = expand = resolve_once = None  # type: ignore[assignment]
        return result if result is not None else self.new(summary.qualname.rpartition(".")[2] + "()", external=True)

    def replay_callbacks(self, callbacks: list[Op], bound: dict[str, tuple[Val, str]], e: ast.Call,
                         src: SourceFile) -> None:
        """The library calls back into the project (``run(example)`` calls ``example.step()`` in a
        loop): run those methods, in a loop of their own when the library loops over them."""
        groups: list[list[Op]] = []  # consecutive callbacks with the same in_loop, in the library's order
        for op in callbacks:
            if groups and groups[-1][0].in_loop == op.in_loop:
                groups[-1].append(op)
            else:
                groups.append([op])
        for group in groups:
            in_loop = group[0].in_loop
            loop_id = next(self.ids)
            n_before = len(self.events)
            for k in range(self.unroll_count() if in_loop else 1):
                if in_loop:
                    self.loop_stack.append((loop_id, k))
                try:
                    for op in group:
                        self.run_callback(op, bound, e, src)
                finally:
                    if in_loop:
                        self.loop_stack.pop()
            if in_loop:
                node = ast.copy_location(ast.While(test=ast.Constant(True), body=[ast.Expr(e)], orelse=[]), e)
                self.record_loop(loop_id, node, src, None, n_before)

    def run_callback(self, op: Op, bound: dict[str, tuple[Val, str]], e: ast.Call, src: SourceFile) -> None:
        hit = bound.get(parse_path(op.binding.get("target", ""))[0])
        if hit is None:
            return
        target = hit[0]
        if op.method and target.kind == "object" and target.cls is not None:
            found = self.find_method(target.cls, op.method)
            if found is not None and not _is_property(found[1]):
                self.inline(found[0], found[1], [target], {}, e, caller_src=src, bound_self=True)
        elif not op.method and target.kind == "func" and target.func is not None:
            bound_self = target.attrs.get("__self__")
            self.inline(target.func[0], target.func[1], [bound_self] if bound_self else [], {}, e,
                        caller_src=src, bound_self=bound_self is not None, closure=target.closure)


def _library_classes(index: LibraryIndex):
    """The interpreter that resolves library classes (imported here: it is built on this module's class)."""
    from warpfix.model.host.summaries import library_interpreter

    return library_interpreter(index)
