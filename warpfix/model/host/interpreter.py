"""The host interpreter: per-root state, values, module globals, events and the roots it runs."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable

from warpfix.finding import Span
from warpfix.model.facts import Buffer, Event, EventKind, KernelDef, Loop, TapeScope, Trace
from warpfix.model.host.calls import Calls
from warpfix.model.host.classes import Classes
from warpfix.model.host.expressions import Expressions
from warpfix.model.host.library_calls import LibraryCalls
from warpfix.model.host.limits import MAX_EVENTS
from warpfix.model.host.linker import ProjectLinks
from warpfix.model.host.loops import Loops
from warpfix.model.host.statements import Statements
from warpfix.model.host.syntax import _is_static, _text
from warpfix.model.host.values import Val, Varies, _Budget, _Frame, _normalise_index, _Return
from warpfix.model.host.warp_api import WarpApi
from warpfix.model.library import LibraryIndex
from warpfix.model.project_files import ModuleResolver, ProjectKernels
from warpfix.model.source import SourceFile


class HostInterpreter(Statements, Loops, Expressions, Calls, Classes, LibraryCalls, WarpApi):
    """Runs roots of a project symbolically and collects :class:`Trace` objects."""

    def __init__(self, files: dict[str, SourceFile], kernels: list[KernelDef], modules: dict[str, SourceFile],
                 library: LibraryIndex | None = None):
        self.files = files
        self.library = library  # installed packages: calls into them replay their effect summaries
        self.follow_all = False  # inline every function (library summaries), not only effectful ones
        self.modules = modules  # dotted module name -> file
        self.resolver = ModuleResolver(files.values(), modules)
        self.module_suffixes = self.resolver.suffixes  # "b.c" -> files of modules "a.b.c", "b.c"
        self.kernels_by_file: dict[str, dict[str, KernelDef]] = {}
        for k in kernels:
            self.kernels_by_file.setdefault(k.path, {})[k.name] = k
        self.own_kernels = ProjectKernels(kernels)  # a library summary's launch of a checked file's kernel
        self.ids = itertools.count(1)
        self.globals: dict[str, dict[str, Val]] = {}
        self.indexes: dict[str, tuple[dict[str, tuple], list[tuple[str, int]]]] = {}
        self.inlined: set[int] = set()  # ids of FunctionDef nodes inlined from another root
        # the project's files linked by their summaries: which functions are effectful, the methods
        # by name (a method called on an unknown value is guessed when one class has it)
        self.links = ProjectLinks(files, self.resolver.resolve, library, set(self.module_suffixes))
        self.effectful = self.links.effectful  # (path, line, column) of each def the interpreter inlines
        self.property_names = self.links.property_names  # names of @property getters of project classes
        self.too_costly: set[int] = set()  # functions whose inlining ran past CALL_STEPS in this root
        self.call_limits: list[int] = []
        self.loop_nodes: dict[int, list[ast.AST]] = {}  # id(for loop) -> every node of its body
        # id(node) -> (node, its span): a site runs again in every unrolled pass, inlined call and root
        self.spans: dict[int, tuple[ast.AST, Span]] = {}
        # per-root state
        self.steps = 0
        self.events: list[Event] = []
        self.loops: dict[int, Loop] = {}
        self.tapes: list[TapeScope] = []
        self.loop_stack: list[tuple[int, int]] = []
        self.branch_stack: list[tuple[int, int]] = []
        self.call_stack: list[Span] = []
        self.func_stack: list[int] = []
        # values a caller always hands over (a library function's parameters without a default, while its
        # summary is derived): ``if control is None: control = ...`` does not replace the caller's value
        self.given: set[int] = set()
        self.varying: dict[int, Varies] = {}  # id of a known int -> how it varies between loop passes (per root)
        self.unknown_starts: dict[int, int] = {}  # id of a ``range`` start not known -> its stand-in (Loops)
        # ``@contextmanager`` generators being run by a with-statement: (generator id, its with-body)
        self.yield_handlers: list[tuple[int, Callable[[Val, Span], None]]] = []
        # the yields whose caller's loop body runs now (``for it in optimize(...)``): each event there records
        # the innermost one as ``detail["resumed_at"]`` (the generator hands control to the caller there)
        self.resumed: list[Span] = []

    # ------------------------------------------------------------------ values
    def new(self, label: str, kind: str = "unknown", **kw) -> Val:
        return Val(next(self.ids), label, kind, **kw)

    def buffer(self, v: Val) -> Buffer:
        if v.buf is None:
            v.buf = Buffer(v.id, v.label, requires_grad=True if v.grad_enabled else None)
            for ev in v.aliased_by:
                ev.reads.append(v.buf)
            if v.kind == "unknown":
                v.kind = "array"
        return v.buf

    def fresh_array(self, label: str, span: Span, alloc: str, requires_grad: bool | None, explicit: bool) -> Val:
        v = self.new(label, "array", fresh=True)
        v.buf = Buffer(v.id, label, span, alloc, requires_grad, explicit, fresh=True)
        return v

    def attr(self, obj: Val, name: str) -> Val:
        child = obj.attrs.get(name)
        if child is None:
            if obj.kind == "module" and obj.module is not None:
                child = self.module_global(obj.module, name)
            elif obj.kind == "class" and obj.cls is not None:
                child = self.class_attr(obj, name)
            elif obj.kind == "lib":
                child = self.new(f"{obj.label}.{name}", "lib", value=f"{obj.value}.{name}")
            else:
                child = self.new(f"{obj.label}.{name}", external=obj.external, grad_enabled=obj.grad_enabled,
                                 aliased_by=obj.aliased_by)
                if name == "grad" and obj.kind in ("array", "unknown"):
                    child.kind = "array"
                    child.buf = Buffer(child.id, child.label, grad_of=self.buffer(obj))
            obj.attrs[name] = child
        return child

    def grad_read(self, v: Val, e: ast.expr, owner: ast.expr, src: SourceFile) -> Val:
        """Record a read of gradient ``v`` (``x.grad``, ``tape.gradients[x]``: :mod:`warpfix.model.grad_reads`)."""
        if v.buf is not None and v.buf.grad_of is not None:
            if v.buf.grad_of.requires_grad is None:
                v.buf.grad_of.requires_grad = True  # its gradient is used, so it has one
            self.emit("grad_read", e, src, reads=[v.buf], names={v.buf.id: _text(e)}, detail={"owner": _text(owner)})
        return v

    def dict_view(self, d: Val, how: str) -> Val:
        """``d.keys()``, ``d.values()`` or ``d.items()`` of a dict display whose keys are literals (``DICT``):
        a list of known length, its entries in insertion order."""
        view = self.new(f"{d.label}.{how}()", "list")
        for i, (key, value) in enumerate(list(d.items.items())):
            entry = name = self.new(repr(key), "const", value=key)
            if how == "values":
                entry = value
            elif how == "items":
                entry = self.new(f"({key!r}, {value.label})", "list", length=2)
                entry.items["0"], entry.items["1"] = name, value
            view.items[str(i)] = entry
        view.length = len(view.items)
        return view

    def item(self, obj: Val, key: str) -> Val:
        key = _normalise_index(obj, key)
        child = obj.items.get(key)
        if child is None:
            if obj.factory is not None:
                expr, env, src = obj.factory
                frame = _Frame(src, dict(env))
                if obj.factory_var is not None and key.isdigit():
                    frame.locals[obj.factory_var] = self.new(obj.factory_var, "int", value=int(key))
                saved = self.events
                self.events = []  # building a lazy element records nothing
                try:
                    child = self.eval(expr, frame)
                except (_Return, _Budget, RecursionError):
                    child = self.new(f"{obj.label}[{key}]")
                self.events = saved
                if child.kind in ("int", "const"):
                    child = self.new(f"{obj.label}[{key}]")
            else:
                child = self.new(f"{obj.label}[{key}]")
                if obj.buf is not None and key.startswith("slice:"):
                    child.buf = Buffer(child.id, child.label, view_of=obj.buf)
                    child.kind = "array"
            obj.items[key] = child
        return child

    # ------------------------------------------------------------------ modules & globals
    def module_globals(self, src: SourceFile) -> dict[str, Val]:
        """This root's values of the module's globals, created on first use (see :meth:`module_global`)."""
        g = self.globals.get(src.path)
        if g is None:
            g = self.globals[src.path] = {}
        return g

    def module_global(self, src: SourceFile, name: str) -> Val:
        """The value of a module-level name: a def, class, constant or import of the module (resolved
        across project modules and star imports), else an unknown value that stays the same object
        for the rest of the root."""
        g = self.module_globals(src)
        v = g.get(name)
        if v is None:
            v = self.defined_global(src, name, 0) or self.new(name)
            g[name] = v
        return v

    def defined_global(self, src: SourceFile, name: str, depth: int) -> Val | None:
        g = self.module_globals(src)
        if name in g:
            return g[name]
        if depth > 8:
            return None
        index, stars = self.module_index(src)
        entry = index.get(name)
        v: Val | None = None
        if entry is not None:
            kind = entry[0]
            if kind == "def":
                k = self.kernels_by_file.get(src.path, {}).get(name)
                if k is not None and _defines(k, entry[1]):  # a kernel: its file's tree is not needed
                    v = self.new(name, "kernel", kernel=k)
                else:
                    stmt = _definition(src, entry[1])
                    v = self.new(stmt.name, "func", func=(src, stmt))
            elif kind == "class":
                stmt = _definition(src, entry[1])
                k = self.kernels_by_file.get(src.path, {}).get(stmt.name)
                ckind = "class" if k is None else ("struct" if k.kind == "struct" else "const")
                v = self.new(stmt.name, ckind, cls=(src, stmt))
            elif kind == "const":
                value = entry[1]
                v = self.new(name, "int" if isinstance(value, int) and not isinstance(value, bool) else "const",
                             value=value)
            elif kind == "module":
                target = self.resolve_module(src, entry[1], entry[2])
                v = self.new(name, "module", module=target) if target is not None else None
                if v is None and not entry[2]:
                    v = self.library_value(name, entry[1] if name != entry[1].split(".")[0] else name)
            elif kind == "from":
                _, mod, level, orig = entry
                target = self.resolve_module(src, mod, level)
                if target is not None:
                    v = self.defined_global(target, orig, depth + 1) or self.module_global(target, orig)
                else:
                    sub = self.resolve_module(src, f"{mod}.{orig}" if mod else orig, level)
                    v = self.new(orig, "module", module=sub) if sub is not None else None
                    if v is None and not level and mod:
                        v = self.library_value(name, f"{mod}.{orig}")
        else:
            for mod, level in stars:
                target = self.resolve_module(src, mod, level)
                if target is not None and not name.startswith("_"):
                    v = self.defined_global(target, name, depth + 1)
                    if v is not None:
                        break
        if v is not None:
            g[name] = v
        return v

    def library_value(self, name: str, dotted: str) -> Val | None:
        """A name bound to something in an installed package (``import newton``), when its source is there."""
        if self.library is None or not self.library.has_package(dotted.split(".")[0]):
            return None
        return self.new(name, "lib", value=dotted)

    def module_index(self, src: SourceFile) -> tuple[dict[str, tuple], list[tuple[str, int]]]:
        """Module-level definitions and imports by name (computed once per file), and star imports.
        A project file's comes from its summary, with the place of each definition for its node:
        only a file whose definition is used is parsed again (a re-export is not)."""
        if src.path in self.links.summaries:
            return self.links.index(src.path)
        hit = self.indexes.get(src.path)
        if hit is not None:
            return hit
        index: dict[str, tuple] = {}
        stars: list[tuple[str, int]] = []
        for stmt in src.tree.body:
            if isinstance(stmt, ast.FunctionDef):
                index[stmt.name] = ("def", stmt)
            elif isinstance(stmt, ast.ClassDef):
                index[stmt.name] = ("class", stmt)
            elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        index[t.id] = ("const", stmt.value.value)
        src.import_bindings(index, stars)
        self.indexes[src.path] = (index, stars)
        return index, stars

    def resolve_module(self, src: SourceFile, mod: str, level: int) -> SourceFile | None:
        return self.resolver.resolve(src, mod, level)

    def class_attr(self, cls_val: Val, name: str) -> Val:
        assert cls_val.cls is not None
        src, node = cls_val.cls
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return self.new(name, "func", func=(src, stmt))
        return self.new(f"{cls_val.label}.{name}")

    # ------------------------------------------------------------------ events
    def span_of(self, src: SourceFile, node: ast.AST) -> Span:
        """``src.span(node)``, computed once per node (one shared, immutable :class:`Span`)."""
        hit = self.spans.get(id(node))
        if hit is None or hit[0] is not node:
            hit = self.spans[id(node)] = (node, src.span(node))
        return hit[1]

    def emit(self, kind: EventKind, node: ast.AST, src: SourceFile, **kw) -> Event:
        if len(self.events) >= MAX_EVENTS:
            raise _Budget
        if self.resumed:
            kw["detail"] = {**(kw.get("detail") or {}), "resumed_at": self.resumed[-1]}
        ev = Event(
            kind,
            self.span_of(src, node),
            node,
            tapes=tuple(self.tapes),
            loops=tuple(self.loop_stack),
            call_stack=tuple(self.call_stack),
            branches=tuple(self.branch_stack),
            **kw,
        )
        self.events.append(ev)
        return ev

    # ------------------------------------------------------------------ roots
    def run_module(self, src: SourceFile) -> Trace:
        self.reset()
        frame = _Frame(src, self.module_globals(src))
        try:
            self.block(src.tree.body, frame, module_level=True)
        except (_Budget, _Return):
            pass
        return Trace(f"{src.path}:<module>", src.path, self.events, self.loops)

    def run_function(self, src: SourceFile, fn: ast.FunctionDef) -> Trace:
        """A top-level function no module body reached: its parameters are unknown values."""
        self.reset()
        frame = _Frame(src, {}, fn=fn)
        self.bind_unknown_params(fn, frame, skip_self=False)
        self.run_body(fn, frame)
        return Trace(f"{src.path}:{fn.name}", src.path, self.events, self.loops)

    def run_class(self, src: SourceFile, cls: ast.ClassDef, methods: list[ast.FunctionDef]) -> list[Trace]:
        """``__init__`` once, then each method no module body reached, on one shared ``self``: one
        trace per method (``__init__``'s events, then the method's), because the order in which a
        caller outside the project invokes the methods is unknown."""
        self.reset()
        self_val = self.new("self", "object", cls=(src, cls))
        found_init = self.find_method((src, cls), "__init__")
        if found_init is not None:
            init_src, init = found_init
            try:
                self.inline(init_src, init, [self_val], {}, init, bound_self=True)
            except _Budget:
                return [Trace(f"{src.path}:{cls.name}", src.path, self.events, self.loops)]
        setup, setup_loops, steps = self.events, self.loops, self.steps
        traces = []
        for fn in methods:
            self.events, self.loops, self.steps = list(setup), dict(setup_loops), steps
            self.tapes, self.loop_stack, self.branch_stack, self.call_stack = [], [], [], []
            frame = _Frame(src, {}, self_val=self_val, fn=fn)
            if not _is_static(fn) and (fn.args.posonlyargs or fn.args.args):
                first = (fn.args.posonlyargs or fn.args.args)[0].arg
                frame.locals[first] = self_val
            self.bind_unknown_params(fn, frame, skip_self=not _is_static(fn))
            self.run_body(fn, frame)
            traces.append(Trace(f"{src.path}:{cls.name}.{fn.name}", src.path, self.events, self.loops))
        return traces

    def bind_unknown_params(self, fn: ast.FunctionDef, frame: _Frame, skip_self: bool) -> None:
        args = fn.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        for a in params[1:] if skip_self and params else params:
            frame.locals[a.arg] = self.new(a.arg)
        if args.vararg:
            frame.locals[args.vararg.arg] = self.new(args.vararg.arg, "list")
        if args.kwarg:
            frame.locals[args.kwarg.arg] = self.new(args.kwarg.arg)

    def run_body(self, fn: ast.FunctionDef, frame: _Frame) -> bool:
        """Run a root body; False when the event budget ran out."""
        self.func_stack.append(id(fn))
        try:
            self.block(fn.body, frame)
        except _Return:
            pass
        except _Budget:
            return False
        finally:
            self.func_stack.pop()
        return True

    def reset(self) -> None:
        self.steps = 0
        self.call_limits = []
        self.events = []
        self.loops = {}
        self.tapes = []
        self.captured_backward = False  # a skipped graph-capture body called .backward(): its launches replay it
        self.if_depth: dict[int, int] = {}  # if-statement id -> call depth where it runs
        self.scope_depth: dict[int, int] = {}  # tape scope instance -> call depth of its with-statement
        self.loop_stack = []
        self.branch_stack = []
        self.call_stack = []
        self.func_stack = []
        self.globals = {}
        self.varying = {}  # id of a known int -> how it varies between loop passes
        # per root, so that what a root sees does not depend on which roots ran before it
        self.too_costly = set()


def _definition(src: SourceFile, at: ast.AST | tuple[str, int, int]) -> ast.AST:
    """A module index's definition: its node, or (in a project file's index) its place."""
    return at if isinstance(at, ast.AST) else src.definition_at(at[1], at[2])


def _defines(kernel: KernelDef, at: ast.AST | tuple[str, int, int]) -> bool:
    """Whether the module index's definition ``at`` (a node, or a place) is ``kernel``."""
    return kernel.defined_at(at) if isinstance(at, ast.AST) else kernel.key == at[1:]
