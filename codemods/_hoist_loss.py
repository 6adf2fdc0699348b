"""WF601 hoist: whether the windows of a loop only add into a loss that lives across them.

A loss that the window loop neither allocates nor zeroes (``loss.zero_()`` once before the loop, or an
array ``self.loss`` made once by the class) and that every launch of a window only *adds* into
(``wp.atomic_add(loss, 0, ...)``, ``loss[0] += ...``) holds, after the loop, the sum of every window's
terms: the episode objective. Then the hoist needs no per-window loss and no ``<loss>_total``: the one
``tape.backward(loss)`` after the loop differentiates that sum, and nothing the program computes or prints
changes (the forward launches are the same, in the same order, on the same arrays).

:class:`LossWalk` checks that on the program's text, with Python's ``ast``: every launch reached from the
window loop's body (through the project's functions and methods, the loss followed by name, attribute
and argument) that names the loss must pass it to a kernel parameter that is only accumulated into (the
kernel facts of :mod:`warpfix.model.kernels`), and nothing else may write it: no ``zero_``/``fill_``/
``assign``/``wp.copy`` into it, no new array bound to it, no hand-over to code outside the project.
Anything it cannot follow is a refusal that says where (:class:`LossRefusal`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from codemods._project_code import Frame, ProjectCode, nodes

MAX_DEPTH = 10
_OVERWRITES = ("zero_", "fill_", "assign")
_ARRAY_WRITES = ("write", "rmw", "inplace_mul", "read")
# builtins that only look at what they are handed (`print(loss)`)
_READ_ONLY = frozenset({"print", "repr", "str", "format", "float", "int", "bool", "len", "id", "isinstance", "type"})


def _bound_names(fn: ast.FunctionDef) -> set[str]:
    """The names ``fn`` binds itself: its parameters and the targets of its assignments."""
    params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg]
    return {a.arg for a in params if a is not None} | {
        t.id for n in nodes(fn.body) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
        for t in ast.walk(target) if isinstance(t, ast.Name)
    }


class LossRefusal(Exception):
    """The windows do not visibly only add into the loss; the message says where."""


def norm(text: str) -> str:
    """An expression's text as ``ast.unparse`` writes it (``self.loss``, ``losses[0]``)."""
    return ast.unparse(ast.parse(text.strip(), mode="eval").body)


def _place(node: ast.AST) -> bool:
    """A name, attribute or subscript chain without calls: something that names an array."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and any(isinstance(n, ast.Call) for n in ast.walk(node.slice)):
            return False
        node = node.value
    return isinstance(node, ast.Name)


@dataclass
class LossWalk(ProjectCode):
    """What every window does to the loss, from the window loop's body down through the project's code."""

    adds: list[str] = field(default_factory=list)  # "running_cost (line 139)": the launches that add into it
    _seen: set[tuple[str, int, frozenset[str]]] = field(default_factory=set)

    # -- entry ------------------------------------------------------------------------------
    def check(self, path: str, loop_line: int, loss: str) -> None:
        """Raise :class:`LossRefusal` unless each window of the loop at ``path:loop_line`` only adds into ``loss``."""
        module = self._module(path)
        if module is None:
            raise LossRefusal(f"{path} does not parse")
        loop = next((n for n in ast.walk(module.tree) if isinstance(n, (ast.For, ast.While))
                     and n.lineno == loop_line), None)
        if loop is None:
            raise LossRefusal(f"no loop at line {loop_line}")
        func = self._enclosing(module, loop, ast.FunctionDef)
        cls = self._enclosing(module, func, ast.ClassDef) if func is not None else None
        frame = Frame(module, func, cls, set(), "the window loop")
        frame.forms = self._aliases(func.body if func is not None else module.tree.body, {norm(loss)})
        self._walk(loop.body, frame, 0)
        if not self.adds:
            raise LossRefusal(f"no launch of the window loop adds into {loss}")

    # -- the walk ---------------------------------------------------------------------------
    def _walk(self, stmts: list[ast.stmt], frame: Frame, depth: int) -> None:
        for node in nodes(stmts):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                self._binding(node, frame)
            elif isinstance(node, ast.Call):
                self._call(node, frame, depth)

    def _binding(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign, frame: Frame) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, (ast.Name, ast.Attribute, ast.Subscript)) and ast.unparse(t) in frame.forms:
                    if isinstance(node, ast.Assign) and value is not None and _place(value) and (
                        ast.unparse(value) in frame.forms
                    ):
                        continue  # `loss = self.loss`: another name for the same array
                    raise LossRefusal(
                        f"{ast.unparse(t)} is bound anew at line {node.lineno} ({frame.where}): every window gets "
                        "its own loss array there"
                    )

    def _call(self, call: ast.Call, frame: Frame, depth: int) -> None:
        func = call.func
        warp_call = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and (
            func.value.id in frame.module.warp
        )
        short = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if warp_call and short in ("launch", "launch_tiled"):
            self._launch(call, frame)
            return
        if warp_call and short == "copy":
            dst = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "dest"), None)
            if dst is not None and ast.unparse(dst) in frame.forms:
                raise LossRefusal(f"wp.copy at line {call.lineno} ({frame.where}) overwrites {ast.unparse(dst)}")
            return
        if warp_call:
            return  # warp's other functions read their arguments (wp.clone, wp.synchronize, ...)
        if short == "backward" and isinstance(func, ast.Attribute):
            return  # `tape.backward(loss)` seeds the loss's gradient, never its value
        if isinstance(func, ast.Attribute) and ast.unparse(func.value) in frame.forms:
            if short in _OVERWRITES:
                raise LossRefusal(
                    f"{ast.unparse(func)}() at line {call.lineno} ({frame.where}) resets it in every window"
                )
            return  # a read of the array (numpy(), list(), ...)
        callees = self._callees(call, frame)
        if not callees and isinstance(func, ast.Name) and func.id in _READ_ONLY:
            return
        if not callees:
            handed = [a for a in self._arguments(call) if ast.unparse(a) in frame.forms]
            if handed:
                raise LossRefusal(
                    f"it is handed to {ast.unparse(func)}() at line {call.lineno} ({frame.where}), whose code is "
                    "not in the project"
                )
            return
        if depth >= MAX_DEPTH:
            raise LossRefusal(f"the calls from the window loop nest deeper than {MAX_DEPTH} at line {call.lineno}")
        for callee in callees:
            self._enter(call, callee, frame, depth)

    def _arguments(self, call: ast.Call) -> list[ast.expr]:
        args = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
        return args + [k.value for k in call.keywords]

    def _enter(self, call: ast.Call, callee: Frame, frame: Frame, depth: int) -> None:
        """Walk ``callee`` with the loss's names there: its parameters that receive the loss (or the object
        holding it), and the module-level name when the loop's code is module-level code of the same file."""
        fn = callee.func
        assert fn is not None
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        pairs: list[tuple[str, str]] = []  # (expression at the call, the callee's name for it)
        if callee.cls is not None and isinstance(call.func, ast.Attribute) and params and not any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list
        ):
            pairs.append((ast.unparse(call.func.value), params.pop(0)))
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                self._unfollowed(arg.value, call, frame)
                continue
            if i < len(params):
                pairs.append((ast.unparse(arg), params[i]))
            else:
                self._unfollowed(arg, call, frame)
        named = params + [a.arg for a in fn.args.kwonlyargs]
        for kw in call.keywords:
            if kw.arg is not None and kw.arg in named:
                pairs.append((ast.unparse(kw.value), kw.arg))
            else:
                self._unfollowed(kw.value, call, frame)
        forms = set()
        for form in frame.forms:
            for expr, param in pairs:
                if form == expr:
                    forms.add(param)
                elif form.startswith((expr + ".", expr + "[")):
                    forms.add(param + form[len(expr):])
        shared = callee.module is frame.module and (
            frame.func is None  # module-level names the callee sees
            # a closure defined in the caller, or beside it in a function around both: the names they share
            or self._enclosing(callee.module, fn, ast.FunctionDef) is not None)
        if shared:
            local = _bound_names(fn) | (_bound_names(frame.func) if frame.func is not None and (
                self._enclosing(callee.module, fn, ast.FunctionDef) is not frame.func) else set())
            forms |= {f for f in frame.forms if f.split(".")[0].split("[")[0] not in local}
        if not forms:
            return
        forms = self._aliases(fn.body, forms)
        key = (callee.module.path, fn.lineno, frozenset(forms))
        if key in self._seen:
            return
        self._seen.add(key)
        callee.forms = forms
        self._walk(fn.body, callee, depth + 1)

    def _unfollowed(self, arg: ast.expr, call: ast.Call, frame: Frame) -> None:
        if ast.unparse(arg) in frame.forms:
            raise LossRefusal(
                f"it is passed to {ast.unparse(call.func)}() at line {call.lineno} ({frame.where}) as an argument "
                "no parameter names"
            )

    def _launch(self, call: ast.Call, frame: Frame) -> None:
        """A launch that names the loss must hand it to a kernel parameter the kernel only adds into."""
        def arg(name: str, index: int) -> ast.expr | None:
            found = next((k.value for k in call.keywords if k.arg == name), None)
            return found if found is not None else call.args[index] if len(call.args) > index else None

        kernel_expr = arg("kernel", 0)
        elements: list[ast.expr] = []
        for name, index in (("inputs", 2), ("outputs", 3)):
            value = arg(name, index)
            if isinstance(value, (ast.List, ast.Tuple)):
                elements.extend(value.elts)
            elif value is not None and any(ast.unparse(n) in frame.forms for n in ast.walk(value)):
                raise LossRefusal(f"the launch at line {call.lineno} ({frame.where}) passes it in a list built "
                                  "elsewhere")
        positions = [i for i, e in enumerate(elements) if ast.unparse(e) in frame.forms]
        if not positions:
            return
        kernel = self._kernel(kernel_expr, frame.module) if kernel_expr is not None else None
        shown = ast.unparse(kernel_expr) if kernel_expr is not None else "?"
        if kernel is None:
            raise LossRefusal(f"kernel {shown}, launched at line {call.lineno} ({frame.where}), is not defined in "
                              "the project: whether it adds into the loss cannot be seen")
        params = kernel.positional
        for i in positions:
            if i >= len(params):
                raise LossRefusal(f"the launch of {shown} at line {call.lineno} passes more arguments than it has "
                                  "parameters")
            facts = kernel.params[params[i]]
            if facts.has(*_ARRAY_WRITES) or not facts.accumulated:
                how = "stores into it with `=`" if facts.written else "reads it" if facts.has("read") else (
                    "never adds into it")
                raise LossRefusal(
                    f"kernel {kernel.name} (line {kernel.span.line}), launched at line {call.lineno} ({frame.where}), "
                    f"{how} (parameter {params[i]}) instead of only adding into it with wp.atomic_add or +="
                )
        self.adds.append(f"{kernel.name} (line {call.lineno})")

    def _aliases(self, body: list[ast.stmt], forms: set[str]) -> set[str]:
        """``forms`` and the names bound to one of them (``loss = planner.loss``), or that one of them is bound to."""
        forms = set(forms)
        pairs = [(ast.unparse(n.targets[0]), ast.unparse(n.value)) for n in nodes(body)
                 if isinstance(n, ast.Assign) and len(n.targets) == 1 and _place(n.targets[0]) and _place(n.value)]
        changed = True
        while changed:
            changed = False
            for target, value in pairs:
                if (target in forms) != (value in forms):
                    forms |= {target, value}
                    changed = True
        return forms
