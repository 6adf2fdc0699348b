"""Abstract interpretation of host code: what happens to which array, in which order, on which tape.

Every value the host code handles is a :class:`Val`: it can stand for an array (its
:class:`Buffer` is created the first time the value is used as one), an object whose
attributes are values, a list/dict whose items are values, a tape, a kernel, a project
function or class, or a small integer (loop counters, so ``states[i]`` and ``states[i + 1]``
resolve to distinct items). Attribute and item assignment mutate the shared value, so Python
aliasing (``states[0] = states[-1]``, ``a, b = b, a``) is modelled by construction.

Project functions, methods and constructors are inlined with their arguments bound; loops
run three consecutive iterations (more for an ``xs[t % k]`` rotation) and, with a known trip
count, the last one (see :func:`_passes`); both arms of an ``if`` run, each event tagged with
its arm. Calls into an installed Warp-based package (newton, warp.fem, warp.optim) replay the effect summary derived from
the package's own source (:mod:`warpfix.model.library`): one event per library launch or copy, at
the user's call site, with ``detail["library"]`` naming the function. Other calls outside the
project are opaque: they read the arrays they receive and return fresh unknown values (never
assumed to write: a guess there would only produce false alarms).
"""

from __future__ import annotations

import ast
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from warpfix.finding import Span
from warpfix.model.facts import Buffer, Event, EventKind, KernelDef, Loop, TapeScope, Trace
from warpfix.model.grad_reads import grad_owner
from warpfix.model.library import LibraryIndex, Op, Summary, parse_path
from warpfix.model.project_files import ProjectKernels, ProjectModules
from warpfix.model.source import SourceFile

MAX_DEPTH = 6  # inlining depth
MAX_EVENTS = 5000  # per root
MAX_STEPS = 6000  # statements executed per root
CALL_STEPS = 1500  # statements one inlined call may execute; past that it counts as opaque
# passes of a loop: three consecutive iterations, so a buffer reused every second step (``states[t % 2]``,
# a state list repeating two buffers) is written by one pass, read by the next, overwritten by the third
LOOP_UNROLL = 3
MAX_PERIOD = 4  # ``xs[t % k]`` in a loop's body: k + 1 consecutive iterations, for k up to this
MAX_UNROLLED_LOOPS = 3  # loops nested deeper than this run their body once

_ALLOC = {"zeros", "empty", "ones", "full", "array", "from_numpy", "from_torch", "from_jax", "from_dlpack"}
_ALLOC_LIKE = {"zeros_like", "empty_like", "ones_like", "full_like"}
# Python builtins that neither read an array's values nor write one (when the name is not rebound)
_PURE_BUILTINS = frozenset({"len", "range", "isinstance", "issubclass", "str", "repr", "type", "id",
                            "hash", "hasattr", "getattr", "callable", "enumerate", "zip", "iter"})
_LAUNCH = {"launch", "launch_tiled"}
MAX_CONCAT = 4096  # ``a + b`` of lists with known lengths is followed element by element up to this length
CONCAT_PREFIX = 8  # ``a + b`` where ``b`` is a comprehension of unknown length: its elements taken at the ``+``


@dataclass(eq=False)
class Val:
    id: int
    label: str
    kind: str = "unknown"  # unknown | array | object | list | tape | kernel | func | class | module | int | const
    buf: Buffer | None = None
    attrs: dict[str, Val] = field(default_factory=dict)
    items: dict[str, Val] = field(default_factory=dict)
    kernel: KernelDef | None = None
    func: tuple[SourceFile, ast.FunctionDef] | None = None
    cls: tuple[SourceFile, ast.ClassDef] | None = None
    module: SourceFile | None = None
    value: object = None  # int/const payload
    tape: int | None = None
    factory: tuple[ast.expr, dict[str, Val], SourceFile] | None = None  # lazy list elements
    factory_var: str | None = None  # ``[f(i) for i in range(n)]``: the name bound to each element's index
    fresh: bool = False  # produced by an allocation / constructor seen in the project
    length: int | None = None  # lists whose length is known (literals, appends, range(N) comprehensions)
    is_struct: bool = False  # an instance of a project @wp.struct
    lib_cls: tuple[SourceFile, ast.ClassDef] | None = None  # an instance of an installed library's class
    external: bool = False  # returned by a library call: never guessed to be a project object
    bound_attrs: set[str] = field(default_factory=set)  # library object: attributes its constructor bound
    # made by a library call given ``requires_grad=True`` (``builder.finalize(requires_grad=True)``), or
    # by a method of such an object (``model.state()``): its arrays carry gradients
    grad_enabled: bool = False
    aliased_by: list[Event] = field(default_factory=list)  # ``[x] * n`` rebind events that cover this value


class _Return(Exception):
    pass


class _Budget(Exception):
    pass


class _CallBudget(Exception):
    """An inlined call ran past its own statement budget."""


@dataclass
class _Frame:
    src: SourceFile
    locals: dict[str, Val]
    self_val: Val | None = None
    returned: Val | None = None
    fn: ast.FunctionDef | None = None  # the function being run (``super()`` starts above its class)


class HostInterpreter:
    """Runs roots of a project symbolically and collects :class:`Trace` objects."""

    def __init__(self, files: dict[str, SourceFile], kernels: list[KernelDef], modules: dict[str, SourceFile],
                 library: LibraryIndex | None = None):
        self.files = files
        self.library = library  # installed packages: calls into them replay their effect summaries
        self.follow_all = False  # inline every function (library summaries), not only effectful ones
        self.modules = modules  # dotted module name -> file
        self.module_suffixes: dict[str, list[SourceFile]] = {}  # "b.c" -> files of modules "a.b.c", "b.c"
        for src in {id(f): f for f in modules.values()}.values():
            parts = src.module_name.split(".")
            for k in range(len(parts)):
                self.module_suffixes.setdefault(".".join(parts[k:]), []).append(src)
        self.kernels_by_file: dict[str, dict[str, KernelDef]] = {}
        for k in kernels:
            self.kernels_by_file.setdefault(k.path, {})[k.name] = k
        self.own_kernels = ProjectKernels(kernels)  # a library summary's launch of a checked file's kernel
        self.own_modules = ProjectModules(files.values())
        self.ids = itertools.count(1)
        self.globals: dict[str, dict[str, Val]] = {}
        self.indexes: dict[str, tuple[dict[str, tuple], list[tuple[str, int]]]] = {}
        self.inlined: set[int] = set()  # ids of FunctionDef nodes inlined from another root
        self.method_index: dict[str, list[tuple[SourceFile, ast.ClassDef, ast.FunctionDef]]] = {}
        self.property_names: set[str] = set()  # names of @property getters of project classes
        for src in files.values():
            for node in src.nodes_of(ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, ast.FunctionDef):
                        self.method_index.setdefault(stmt.name, []).append((src, node, stmt))
                        if _is_property(stmt):
                            self.property_names.add(stmt.name)
        self.effectful = _effectful_functions(files, library, set(self.module_suffixes))
        self.too_costly: set[int] = set()  # functions whose inlining once ran past CALL_STEPS
        self.call_limits: list[int] = []
        self.loop_nodes: dict[int, list[ast.AST]] = {}  # id(for loop) -> every node of its body
        # per-root state
        self.steps = 0
        self.events: list[Event] = []
        self.loops: dict[int, Loop] = {}
        self.tapes: list[TapeScope] = []
        self.loop_stack: list[tuple[int, int]] = []
        self.branch_stack: list[tuple[int, int]] = []
        self.call_stack: list[Span] = []
        self.func_stack: list[int] = []
        # ``@contextmanager`` generators being run by a with-statement: (generator id, its with-body)
        self.yield_handlers: list[tuple[int, Callable[[Val], None]]] = []

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
                                 aliased_by=list(obj.aliased_by))
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
                stmt = entry[1]
                k = self.kernels_by_file.get(src.path, {}).get(stmt.name)
                if k is not None and id(k.node) == id(stmt):
                    v = self.new(stmt.name, "kernel", kernel=k)
                else:
                    v = self.new(stmt.name, "func", func=(src, stmt))
            elif kind == "class":
                stmt = entry[1]
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
        """Module-level definitions and imports by name (computed once per file), and star imports."""
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
        for mod, level, name, asname in src.project_imports:
            if name is None:
                if asname or "." not in mod:
                    index[asname or mod.split(".")[0]] = ("module", mod, level)
            elif name == "*":
                stars.append((mod, level))
            else:
                index[asname or name] = ("from", mod, level, name)
        self.indexes[src.path] = (index, stars)
        return index, stars

    def resolve_module(self, src: SourceFile, mod: str, level: int) -> SourceFile | None:
        full = LibraryIndex.absolute(src, mod, level)  # ``from .x import`` in a package's __init__: its own x
        if full in self.modules:
            return self.modules[full]
        own = self.own_modules.find(src, full) if not level else None  # ``import pkg.x`` inside pkg
        # the same module named from a sibling folder (scripts importing their neighbours)
        candidates = self.module_suffixes.get(full, ())
        return own or (candidates[0] if len(candidates) == 1 else None)

    def class_attr(self, cls_val: Val, name: str) -> Val:
        assert cls_val.cls is not None
        src, node = cls_val.cls
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return self.new(name, "func", func=(src, stmt))
        return self.new(f"{cls_val.label}.{name}")

    # ------------------------------------------------------------------ events
    def emit(self, kind: EventKind, node: ast.AST, src: SourceFile, **kw) -> Event:
        if len(self.events) >= MAX_EVENTS:
            raise _Budget
        ev = Event(
            kind,
            src.span(node),
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

    # ------------------------------------------------------------------ statements
    def block(self, body: list[ast.stmt], frame: _Frame, module_level: bool = False) -> None:
        for stmt in body:
            try:
                self.stmt(stmt, frame, module_level)
            except _Return:
                raise
            except _Budget:
                raise
            except RecursionError:
                raise _Budget from None

    def stmt(self, s: ast.stmt, frame: _Frame, module_level: bool = False) -> None:
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
                    self.assign(s.target, self.new(_text(s.target), "int", value=new), s.value, frame, s)
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
            if known is not None:  # ``if requires_grad:`` inside ``for requires_grad in (False, True)``
                self.block(s.body if known else s.orelse, frame, module_level)
                return
            self.eval(s.test, frame)
            if_id = next(self.ids)
            self.if_depth[if_id] = len(self.call_stack)
            for arm, body in ((0, s.body), (1, s.orelse)):
                if not body:
                    continue
                self.branch_stack.append((if_id, arm))
                try:
                    self.block(body, frame, module_level)
                except _Return:
                    if arm == 1 or not s.orelse:
                        self.branch_stack.pop()
                        raise
                finally:
                    if self.branch_stack and self.branch_stack[-1] == (if_id, arm):
                        self.branch_stack.pop()
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
            if module_level and src.parents.get(id(s)) is src.tree:
                return  # top-level definitions are resolved on first use (module_global)
            k = self.kernels_by_file.get(src.path, {}).get(s.name)
            if k is not None and id(k.node) == id(s):
                frame.locals[s.name] = self.new(s.name, "kernel", kernel=k)
            else:
                frame.locals[s.name] = self.new(s.name, "func", func=(src, s))
        elif isinstance(s, ast.ClassDef):
            if not module_level or src.parents.get(id(s)) is not src.tree:
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

    def for_loop(self, s: ast.For | ast.AsyncFor, frame: _Frame, module_level: bool) -> None:
        src = frame.src
        it = self.eval(s.iter, frame)
        start, step = 0, 1
        is_range = isinstance(s.iter, ast.Call) and isinstance(s.iter.func, ast.Name) and s.iter.func.id == "range"
        run = max(LOOP_UNROLL, self.period(s, frame) + 1) if self.unroll_count() > 1 else 1
        passes = list(range(run))
        if is_range:
            args = [self.eval(a, frame) for a in s.iter.args]  # type: ignore[union-attr]
            if len(args) >= 2 and args[0].kind == "int":
                start = args[0].value  # type: ignore[assignment]
            if len(args) == 3 and args[2].kind == "int":
                step = args[2].value  # type: ignore[assignment]
            if args and all(a.kind == "int" for a in args):
                try:
                    n = len(range(*[a.value for a in args]))  # type: ignore[misc]
                except (TypeError, ValueError):
                    n = None
                if n is not None:
                    passes = _passes(n, run)
        elif it.kind == "list" and it.length is not None:
            passes = _passes(it.length, run)
        elif _is_enumerate(s.iter):
            inner = self.eval(s.iter.args[0], frame)  # type: ignore[union-attr]
            if inner.kind == "list" and inner.length is not None:
                passes = _passes(inner.length, run)
        loop_id = next(self.ids)
        n_before = len(self.events)
        var = s.target.id if isinstance(s.target, ast.Name) else None
        for pass_no, k in enumerate(passes):
            if is_range:
                v = self.new(var or "_", "int", value=start + k * step)
            elif _is_enumerate(s.iter):
                inner = self.eval(s.iter.args[0], frame)  # type: ignore[union-attr]
                v = self.new("enum", "list")
                v.items["0"] = self.new("i", "int", value=k)
                v.items["1"] = self.item(inner, str(k)) if inner.kind == "list" else self.new(f"{inner.label}[{k}]")
            elif it.kind == "list":
                v = self.item(it, str(k))
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

        def body(value: Val) -> None:
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

        self.yield_handlers.append((id(fn), body))
        try:
            bound = callee.attrs.get("__self__")
            self.inline(fsrc, fn, [bound, *args] if bound is not None else args, kwargs, call, caller_src=frame.src,
                        bound_self=bound is not None)
        finally:
            self.yield_handlers.pop()
        if not ran:  # the generator was not followed to its yield: the body still runs
            body(self.new(_text(call)))
        if ran[0] is not None:
            raise ran[0]
        return True

    # ------------------------------------------------------------------ expressions
    def index_key(self, sl: ast.expr, frame: _Frame) -> str:
        if isinstance(sl, ast.Slice):
            return "slice:" + _text(sl)
        v = self.eval(sl, frame)
        if v.kind in ("int", "const") and isinstance(v.value, (int, str)):
            return str(v.value)
        if isinstance(sl, ast.Tuple):
            return ",".join(self.index_key(e, frame) for e in sl.elts)
        # An index the interpreter cannot evaluate (`xs[min(t, n)]` with `t += 1` per step) names the
        # same element within one loop pass, but may name another one in the next pass.
        passes = ",".join(f"{loop}.{k}" for loop, k in self.loop_stack)
        return f"expr:{_text(sl)}@{passes}" if passes else "expr:" + _text(sl)

    def eval(self, e: ast.expr | None, frame: _Frame) -> Val:
        if e is None:
            return self.new("None", "const")
        src = frame.src
        if isinstance(e, ast.Constant):
            return self.new(repr(e.value), "int" if isinstance(e.value, int) and not isinstance(e.value, bool)
                            else "const", value=e.value)
        if isinstance(e, ast.Name):
            v = frame.locals.get(e.id)
            if v is None:
                v = self.module_global(src, e.id)
            return v
        if isinstance(e, ast.Attribute):
            if src.warp_name(e) is not None:
                return self.new(_text(e), "const")
            owner = self.eval(e.value, frame)
            if owner.kind == "object" and owner.cls is not None and e.attr not in owner.attrs:
                found = self.find_method(owner.cls, e.attr)
                if found is not None and _is_property(found[1]):
                    return self.inline(found[0], found[1], [owner], {}, e, caller_src=src, bound_self=True)
                if found is not None and not _is_static(found[1]):
                    # a bound method handed on (``run(n, example.step)``): calling it runs the method
                    return self.new(f"{owner.label}.{e.attr}", "func", func=found, attrs={"__self__": owner})
            elif owner.kind == "unknown" and e.attr in self.property_names and e.attr not in owner.attrs:
                # maybe a computed property of a project class: not one stable value
                return self.new(f"{owner.label}.{e.attr}")
            v = self.attr(owner, e.attr)
            if e.attr == "grad":
                self.grad_read(v, e, e.value, src)
            return v
        if isinstance(e, ast.Subscript):
            owner_node = grad_owner(e)
            if owner_node is not None:  # tape.gradients[x]: x.grad
                return self.grad_read(self.attr(self.eval(owner_node, frame), "grad"), e, owner_node, src)
            base = self.eval(e.value, frame)
            if isinstance(e.slice, ast.Slice) and base.kind == "list":
                sliced = self.list_slice(base, e.slice, frame)
                if sliced is not None:
                    return sliced
            return self.item(base, self.index_key(e.slice, frame))
        if isinstance(e, ast.Call):
            return self.call(e, frame)
        if isinstance(e, (ast.List, ast.Tuple)):
            v = self.new("list", "list")
            i = 0
            for elt in e.elts:
                if isinstance(elt, ast.Starred):
                    self.eval(elt.value, frame)
                    continue
                v.items[str(i)] = self.eval(elt, frame)
                i += 1
            if not any(isinstance(elt, ast.Starred) for elt in e.elts):
                v.length = i
            return v
        if isinstance(e, ast.ListComp):
            v = self.new("list", "list")
            v.factory = (e.elt, {**frame.locals}, src)
            for gen in e.generators:
                self.eval(gen.iter, frame)
            gen = e.generators[0]
            if (
                len(e.generators) == 1
                and not gen.ifs
                and isinstance(gen.iter, ast.Call)
                and isinstance(gen.iter.func, ast.Name)
                and gen.iter.func.id == "range"
                and len(gen.iter.args) == 1
            ):
                n = self.eval(gen.iter.args[0], frame)
                if n.kind == "int" and isinstance(n.value, int):
                    v.length = n.value
                if isinstance(gen.target, ast.Name):
                    v.factory_var = gen.target.id  # element k is ``elt`` at ``i = k``, whether n is known or not
            return v
        if isinstance(e, ast.Dict):
            v = self.new("dict", "list")
            for k, val in zip(e.keys, e.values, strict=True):
                key = k.value if isinstance(k, ast.Constant) else None  # ast.literal_eval's, without its closures' cycle
                vv = self.eval(val, frame)
                if key is not None:
                    v.items[str(key)] = vv
            return v
        if isinstance(e, ast.BinOp):
            left, right = self.eval(e.left, frame), self.eval(e.right, frame)
            if left.kind == "int" and right.kind == "int":
                r = _binop(e.op, left.value, right.value)
                if r is not None:
                    return self.new(_text(e), "int", value=r)
            if (isinstance(e.op, ast.Add) and left.kind == right.kind == "list" and left.length is not None
                    and right.length is not None and left.length + right.length <= MAX_CONCAT):
                v = self.new("list", "list", length=left.length + right.length)  # ``[s0] + [s[i] for i in ...]``
                for k in range(left.length):
                    v.items[str(k)] = self.item(left, str(k))
                for k in range(right.length):
                    v.items[str(left.length + k)] = self.item(right, str(k))
                return v
            if (isinstance(e.op, ast.Add) and left.kind == right.kind == "list" and left.length is not None
                    and right.length is None and right.factory is not None and right.factory_var is not None):
                # ``[s0] + [s[1 + i % 2] for i in range(len(s) - 1)]`` of unknown length: the first elements,
                # taken now (the comprehension reads the list this assignment rebinds)
                v = self.new("list", "list")
                for k in range(left.length):
                    v.items[str(k)] = self.item(left, str(k))
                for k in range(CONCAT_PREFIX):
                    v.items[str(left.length + k)] = self.item(right, str(k))
                return v
            if isinstance(e.op, ast.Mult) and left.kind == "list" and len(left.items) == 1:
                v = self.new("list", "list")
                only = left.items["0"]
                v.items = _SameItem(only)  # type: ignore[assignment]
                if only.kind in ("array", "object", "unknown") and isinstance(e.left, (ast.List, ast.Tuple)):
                    self.repeat_alias(only, e, src)
                return v
            return self.new(_text(e))
        if isinstance(e, ast.UnaryOp):
            operand = self.eval(e.operand, frame)
            if isinstance(e.op, ast.USub) and operand.kind == "int":
                return self.new(_text(e), "int", value=-operand.value)  # type: ignore[operator]
            return self.new(_text(e))
        if isinstance(e, ast.IfExp):
            known = self.known_truth(e.test, frame)
            if known is not None:  # ``x if s == 0 else y`` with ``s`` an unrolled loop index
                return self.eval(e.body if known else e.orelse, frame)
            a = self.eval(e.body, frame)
            self.eval(e.orelse, frame)
            return a
        if isinstance(e, ast.Yield) and self.yield_handlers and self.func_stack \
                and self.yield_handlers[-1][0] == self.func_stack[-1]:
            self.yield_handlers[-1][1](self.eval(e.value, frame))
            return self.new("None", "const")
        if isinstance(e, (ast.BoolOp, ast.Compare, ast.JoinedStr, ast.Lambda, ast.GeneratorExp, ast.SetComp,
                          ast.DictComp, ast.Set, ast.Await, ast.Yield, ast.YieldFrom, ast.FormattedValue)):
            for child in ast.iter_child_nodes(e):
                if isinstance(child, ast.expr) and not isinstance(e, (ast.Lambda, ast.GeneratorExp)):
                    self.eval(child, frame)
            return self.new(_text(e)[:40])
        if isinstance(e, ast.NamedExpr):
            v = self.eval(e.value, frame)
            self.bind(e.target, v, frame)
            return v
        if isinstance(e, ast.Starred):
            return self.eval(e.value, frame)
        return self.new(type(e).__name__)

    def known_truth(self, test: ast.expr, frame: _Frame) -> bool | None:
        """The value of a comparison of two known ints (``s == 0``); None when not known (the test
        is evaluated either way)."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            self.eval(test, frame)
            return None
        left, right = self.eval(test.left, frame), self.eval(test.comparators[0], frame)
        if left.kind != "int" or right.kind != "int":
            return None
        a, b = left.value, right.value
        return {ast.Eq: a == b, ast.NotEq: a != b, ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b,  # type: ignore[operator]
                ast.GtE: a >= b}.get(type(test.ops[0]))  # type: ignore[operator]

    def known_flag(self, test: ast.expr, frame: _Frame) -> bool | None:
        """The truth of ``name`` / ``not name`` when the name holds a literal bool or a known int (a
        loop over ``(False, True)``, ``flag = True``); None otherwise. Only local names: an attribute
        may be set where the model does not look."""
        negate = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        name = test.operand if negate else test  # type: ignore[attr-defined]
        if not isinstance(name, ast.Name) or name.id not in frame.locals:
            return None
        v = frame.locals[name.id]
        if v.kind == "const" and isinstance(v.value, bool) or v.kind == "int" and isinstance(v.value, int):
            return (not v.value) if negate else bool(v.value)
        return None

    def same_buffer_test(self, test: ast.expr, frame: _Frame) -> bool | None:
        """``a.ptr != b.ptr`` / ``a is not b`` (and ``==`` / ``is``) when both sides are one buffer (a
        solver copying its result only when it went elsewhere); None when not known: two different
        buffers may still share memory. Only names and attribute chains are evaluated here: an
        undecided test is evaluated again as the ``if``'s, and a call must not run twice."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot))):
            return None
        sides = [test.left, test.comparators[0]]
        if all(isinstance(x, ast.Attribute) and x.attr == "ptr" for x in sides):
            sides = [x.value for x in sides]  # type: ignore[attr-defined]
        elif isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
            return None
        if not all(_is_name_chain(x) for x in sides):
            return None
        a, b = (self.eval(x, frame) for x in sides)
        if a.buf is None or b.buf is None or a.buf.root().id != b.buf.root().id or a.buf.view_of or b.buf.view_of:
            return None
        return isinstance(test.ops[0], (ast.Eq, ast.Is))

    def repeat_alias(self, only: Val, e: ast.BinOp, src: SourceFile) -> None:
        """``[x] * n`` makes every slot one object: a ``rebind`` event whose reads are ``x``'s arrays,
        including the attributes of ``x`` first used later (``states[t].particle_q``)."""
        ev = self.emit("rebind", e, src, detail={"target": _text(e), "source": _text(e.left.elts[0]),  # type: ignore[attr-defined]
                                                 "repeat": True})
        todo, seen = [only], set()
        while todo:
            v = todo.pop()
            if v.id in seen:
                continue
            seen.add(v.id)
            v.aliased_by.append(ev)
            if v.buf is not None:
                ev.reads.append(v.buf)
            todo.extend(v.attrs.values())

    def list_slice(self, base: Val, sl: ast.Slice, frame: _Frame) -> Val | None:
        """``xs[a:b]`` of a list with int bounds: a new list sharing the same element values."""
        lower = self.eval(sl.lower, frame) if sl.lower is not None else None
        upper = self.eval(sl.upper, frame) if sl.upper is not None else None
        if sl.step is not None:
            return None
        lo = lower.value if lower is not None and lower.kind == "int" else (0 if lower is None else None)
        hi = upper.value if upper is not None and upper.kind == "int" else (base.length if upper is None else None)
        if not isinstance(lo, int) or not isinstance(hi, int):
            return None
        if base.length is not None:
            lo, hi = slice(lo, hi).indices(base.length)[:2]
        if lo < 0 or hi < lo or hi - lo > 256:
            return None
        v = self.new(f"{base.label}[{lo}:{hi}]", "list", length=hi - lo)
        for j in range(hi - lo):
            v.items[str(j)] = self.item(base, str(lo + j))
        return v

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
            return self.inline(fsrc, fn, args, kwargs, e, caller_src=src)
        if callee.kind == "class" and callee.cls is not None:
            return self.construct(callee, args, kwargs, e, src)
        if callee.kind == "struct":
            return self.new(callee.label + "()", "object", fresh=True, is_struct=True)
        if (isinstance(e.func, ast.Name) and e.func.id == "len" and callee.kind == "unknown" and len(args) == 1
                and args[0].kind == "list" and args[0].length is not None):
            return self.new("len()", "int", value=args[0].length)
        if isinstance(e.func, ast.Name) and e.func.id in _PURE_BUILTINS and callee.kind == "unknown":
            return self.new(f"{e.func.id}()")  # ``len(x)``, ``range(n)``: reads no values, writes nothing
        return self.opaque_call(e, args, kwargs, src)

    def opaque_call(self, e: ast.Call, args: list[Val], kwargs: dict[str, Val], src: SourceFile) -> Val:
        arrays = [v for v in [*args, *kwargs.values()] if v.buf is not None]
        if arrays:
            self.emit("call", e, src, reads=[v.buf for v in arrays if v.buf is not None],
                      detail={"callee": _callee_name(e.func)})
        return self.new(_callee_name(e.func) + "()")

    def construct(self, cls_val: Val, args: list[Val], kwargs: dict[str, Val], e: ast.Call,
                  src: SourceFile) -> Val:
        assert cls_val.cls is not None
        csrc, cnode = cls_val.cls
        obj = self.new(cls_val.label + "()", "object", cls=cls_val.cls, fresh=True)
        found = self.find_method((csrc, cnode), "__init__")
        if found is not None:
            self.inline(found[0], found[1], [obj, *args], kwargs, e, caller_src=src, bound_self=True)
        return obj

    def grad_receiver(self, recv: ast.expr, frame: _Frame) -> Val | None:
        """The gradient ``recv`` names without reading it: ``x.grad``, ``tape.gradients[x]``, a local."""
        owner_node = grad_owner(recv)
        if owner_node is not None:
            return self.attr(self.eval(owner_node, frame), "grad")
        return frame.locals.get(recv.id) if isinstance(recv, ast.Name) else None

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
        if name == "append" and recv.kind == "list" and args:
            recv.items[str(len(recv.items))] = args[0]
            if recv.length is not None:
                recv.length += 1
            return self.new("None", "const")
        # project method
        if recv.kind == "object" and recv.cls is not None:
            found = self.find_method(recv.cls, name)
            if found is not None:
                return self.inline(found[0], found[1], [recv, *args], kwargs, e, caller_src=src, bound_self=True)
        if recv.kind == "class" and recv.cls is not None:
            found = self.find_method(recv.cls, name)
            if found is not None:
                return self.inline(found[0], found[1], args, kwargs, e, caller_src=src)
        if recv.kind == "module" and recv.module is not None:
            target = self.attr(recv, name)
            if target.kind == "func" and target.func is not None:
                return self.inline(target.func[0], target.func[1], args, kwargs, e, caller_src=src)
            if target.kind == "class" and target.cls is not None:
                return self.construct(target, args, kwargs, e, src)
            return self.opaque_call(e, args, kwargs, src)
        if recv.kind == "unknown" and not recv.attrs.get(name) and not recv.external:
            candidates = self.method_index.get(name, [])
            if len(candidates) == 1 and not name.startswith("__") and recv.buf is None:
                csrc, cnode, fn = candidates[0]
                recv.kind = "object"
                recv.cls = (csrc, cnode)
                return self.inline(csrc, fn, [recv, *args], kwargs, e, caller_src=src, bound_self=True)
        out = self.opaque_call(e, args, kwargs, src)
        if recv.external:  # a method of something a library made (``model.state()``)
            out.external, out.grad_enabled = True, recv.grad_enabled or _asks_for_grad(e)
        return out

    def find_method(self, cls: tuple[SourceFile, ast.ClassDef], name: str,
                    depth: int = 0) -> tuple[SourceFile, ast.FunctionDef] | None:
        """``name`` defined in the class or, first found, in its bases (project or library classes)."""
        src, node = cls
        fn = _find_method(node, name)
        if fn is not None:
            return src, fn
        if depth > 8:
            return None
        for base in self.bases(src, node):
            hit = self.find_method(base, name, depth + 1)
            if hit is not None:
                return hit
        return None

    def bases(self, src: SourceFile, node: ast.ClassDef) -> list[tuple[SourceFile, ast.ClassDef]]:
        """The class's base classes that the interpreter can resolve (project or library)."""
        out = []
        for base in node.bases:
            saved = self.events
            self.events = []
            try:
                bv = self.eval(base, _Frame(src, self.module_globals(src)))
            except (_Return, _Budget, _CallBudget, RecursionError):
                continue
            finally:
                self.events = saved
            if bv.kind == "class" and bv.cls is not None and bv.cls[1] is not node:
                out.append(bv.cls)
        return out

    def super_method(self, frame: _Frame, name: str) -> tuple[SourceFile, ast.FunctionDef] | None:
        """``super().name``: ``name`` in the bases of the class that defines the running method."""
        cls = frame.src.parents.get(id(frame.fn))
        if not isinstance(cls, ast.ClassDef):
            return None
        for base in self.bases(frame.src, cls):
            hit = self.find_method(base, name)
            if hit is not None:
                return hit
        return None

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
            found = library_interpreter(self.library).find_method(obj.lib_cls, "__init__")  # type: ignore[arg-type]
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
                ops = self.library.callbacks[key] = _callbacks(src, fn, list(targets))
            return Summary(qualname, params, list(ops))
        return self.library.summary(src, fn, qualname, is_method)

    def library_method(self, recv: Val, name: str, e: ast.Call, frame: _Frame) -> Val:
        assert self.library is not None and recv.lib_cls is not None and isinstance(e.func, ast.Attribute)
        args = [self.eval(a, frame) for a in e.args]
        kwargs = {kw.arg: self.eval(kw.value, frame) for kw in e.keywords if kw.arg}
        found = library_interpreter(self.library).find_method(recv.lib_cls, name)
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
                receiver.bound_attrs.add(attr)

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
                hit = resolve(path)
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
                    param_text[pname] = resolve(path)[1]  # type: ignore[index]
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
        resolve = expand = None  # type: ignore[assignment]
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
                        caller_src=src, bound_self=bound_self is not None)

    def inline(self, fsrc: SourceFile, fn: ast.FunctionDef, args: list[Val], kwargs: dict[str, Val],
               site: ast.AST, caller_src: SourceFile | None = None, bound_self: bool = False) -> Val:
        if (
            id(fn) in self.func_stack
            or len(self.func_stack) >= MAX_DEPTH
            or (id(fn) not in self.effectful and not self.follow_all)
            or id(fn) in self.too_costly
        ):
            return self.new(fn.name + "()")
        self.inlined.add(id(fn))
        frame = _Frame(fsrc, {}, fn=fn)
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
        if bound_self and args:
            frame.self_val = args[0]
        self.func_stack.append(id(fn))
        self.call_stack.append((caller_src or fsrc).span(site))
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

    # ------------------------------------------------------------------ warp API
    def warp_call(self, name: str, e: ast.Call, frame: _Frame) -> Val:
        src = frame.src
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        if name == "Tape":
            return self.new("tape", "tape", tape=next(self.ids), fresh=True)
        if name in _LAUNCH:
            return self.launch(e, frame)
        if name in _ALLOC or name in _ALLOC_LIKE or name == "clone":
            return self.allocation(name, e, frame)
        if name == "capture_launch" and self.captured_backward:
            for a in e.args:
                self.eval(a, frame)
            self.emit("capture_launch", e, src)
            return self.new("None", "const")
        if name == "copy":
            args = [self.eval(a, frame) for a in e.args]
            dst = args[0] if args else (self.eval(kw["dest"], frame) if "dest" in kw else None)
            srcv = args[1] if len(args) > 1 else (self.eval(kw["src"], frame) if "src" in kw else None)
            if dst is not None and srcv is not None:
                db, sb = self.buffer(dst), self.buffer(srcv)
                dn = _text(e.args[0]) if e.args else _text(kw["dest"])
                sn = _text(e.args[1]) if len(e.args) > 1 else _text(kw["src"])
                self.emit("copy", e, src, writes=[db], reads=[sb], names={db.id: dn, sb.id: sn})
            return self.new("None", "const")
        for a in e.args:
            self.eval(a, frame)
        for k in e.keywords:
            self.eval(k.value, frame)
        return self.new(f"wp.{name}()", "const" if name in ("constant", "vec3", "vec2", "float32") else "unknown")

    def allocation(self, name: str, e: ast.Call, frame: _Frame) -> Val:
        src = frame.src
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        args = [self.eval(a, frame) for a in e.args]
        for k in e.keywords:
            if k.arg not in ("requires_grad",):
                self.eval(k.value, frame)
        rg_node = kw.get("requires_grad")
        explicit = rg_node is not None
        rg: bool | None
        if isinstance(rg_node, ast.Constant) and isinstance(rg_node.value, bool):
            rg = rg_node.value
        elif rg_node is not None:
            rg = None
        else:
            rg = False
        source: Val | None = None
        if name in _ALLOC_LIKE or name == "clone":
            source = args[0] if args else (self.eval(kw["src"], frame) if "src" in kw else None)
            if source is not None and not explicit:
                rg = source.buf.requires_grad if source.buf is not None else None
        label = _label_of(e)
        v = self.fresh_array(label, src.span(e), name, rg, explicit)
        if name == "array" and "ptr" in kw:
            ptr = kw["ptr"]
            if isinstance(ptr, ast.Attribute) and ptr.attr == "ptr":
                base = self.eval(ptr.value, frame)
                assert v.buf is not None
                v.buf.view_of = self.buffer(base)
                v.buf.fresh = False
        assert v.buf is not None
        reads = [self.buffer(source)] if name == "clone" and source is not None else []
        names: dict[int, str] = {}
        if reads and source is not None:
            names[source.id] = _text(e.args[0] if e.args else kw["src"])
        self.emit("clone" if name == "clone" else "alloc", e, src, writes=[v.buf], reads=reads, names=names,
                  detail={"alloc": name})
        return v

    def launch(self, e: ast.Call, frame: _Frame) -> Val:
        src = frame.src
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        kernel_node = e.args[0] if e.args else kw.get("kernel")
        kernel_val = self.eval(kernel_node, frame) if kernel_node is not None else None
        kernel = kernel_val.kernel if kernel_val is not None else None
        in_node = e.args[2] if len(e.args) > 2 else kw.get("inputs")
        out_node = e.args[3] if len(e.args) > 3 else kw.get("outputs")
        for k in ("dim", "device", "stream"):
            if k in kw:
                self.eval(kw[k], frame)
        arg_nodes: list[ast.expr] = []
        arg_vals: list[Val] = []
        n_inputs = 0
        for group_i, group in enumerate((in_node, out_node)):
            if group is None:
                continue
            if isinstance(group, (ast.List, ast.Tuple)):
                elts = list(group.elts)
                arg_vals.extend(self.eval(a, frame) for a in elts)
                arg_nodes.extend(elts)
            else:
                elts = []
                gv = self.eval(group, frame)
                if self.follow_all and gv.kind == "list" and gv.length is not None and gv.length <= 64:
                    # a library's ``inputs=kernel_inputs`` list (the project's own launch sites stay literal:
                    # codemods rewrite their argument expressions)
                    elts = [group] * gv.length
                    arg_vals.extend(self.item(gv, str(i)) for i in range(gv.length))
                    arg_nodes.extend(elts)
            if group_i == 0:
                n_inputs = len(elts)
        ev_reads: list[Buffer] = []
        ev_writes: list[Buffer] = []
        ev_accums: list[Buffer] = []
        names: dict[int, str] = {}
        binding: dict[str, Buffer] = {}
        arg_map: dict[str, ast.expr] = {}

        def add(lst: list[Buffer], b: Buffer) -> None:
            if all(x.id != b.id for x in lst):
                lst.append(b)

        if kernel is not None:
            params = kernel.positional
            for pname, node, val in zip(params, arg_nodes, arg_vals, strict=False):
                arg_map[pname] = node
                facts = kernel.params[pname]
                if facts.is_array and val.kind not in ("int", "const"):
                    b = self.buffer(val)
                    binding[pname] = b
                    names[b.id] = _text(node)
                    if facts.read:
                        add(ev_reads, b)
                    if facts.written:
                        add(ev_writes, b)
                    if facts.accumulated:
                        add(ev_accums, b)
                # struct fields reached through this parameter
                for fkey, ffacts in kernel.params.items():
                    if not fkey.startswith(pname + ".") or val.kind in ("int", "const"):
                        continue
                    field_name = fkey.split(".", 1)[1]
                    fv = self.attr(val, field_name)
                    fb = self.buffer(fv)
                    binding[fkey] = fb
                    names[fb.id] = f"{_text(node)}.{field_name}"
                    if ffacts.read:
                        add(ev_reads, fb)
                    if ffacts.written:
                        add(ev_writes, fb)
                    if ffacts.accumulated:
                        add(ev_accums, fb)
        else:
            for i, (node, val) in enumerate(zip(arg_nodes, arg_vals, strict=True)):
                if val.kind in ("int", "const"):
                    continue
                b = self.buffer(val)
                names[b.id] = _text(node)
                if i < n_inputs:
                    add(ev_reads, b)
                else:
                    add(ev_writes, b)
        untaped = kw.get("record_tape")
        saved_tapes = self.tapes
        if isinstance(untaped, ast.Constant) and untaped.value is False:
            self.tapes = []
        ev = self.emit(
            "launch",
            e,
            src,
            reads=ev_reads,
            writes=ev_writes,
            accums=ev_accums,
            names=names,
            kernel=kernel,
            binding=binding,
            arg_nodes=arg_map,
            detail={"kernel": _text(kernel_node) if kernel_node is not None else "?",
                    "n_inputs": n_inputs},
        )
        self.tapes = saved_tapes
        if not ev.tapes and saved_tapes:
            ev.detail["record_tape"] = False
        if ev.tapes:
            opened = self.scope_depth.get(ev.tapes[-1].instance, 0)
            if any(self.if_depth.get(if_id, 0) > opened for if_id, _ in ev.branches):
                # under an undecided ``if`` of a function the taped block calls (a solver's
                # ``if model.tendon_count:``): the tape may record it, nothing says it does
                ev.detail["conditional"] = True
        return self.new("None", "const")


_WARP_LIBRARIES = {"fem", "optim"}  # warp's own Python-level libraries, summarised like any package


class _LibraryInterpreter(HostInterpreter):
    """Runs installed libraries' functions to derive their effect summaries: modules load from the
    library index on first use, every function is followed, no method is guessed by name."""

    def __init__(self, index: LibraryIndex) -> None:
        super().__init__({}, [], {})
        self.index = index
        self.follow_all = True
        self.kernels_by_file = _LazyKernels(index)

    def resolve_module(self, src: SourceFile, mod: str, level: int) -> SourceFile | None:
        full = self.index.absolute(src, mod, level)
        hit = self.modules.get(full)
        if hit is None:
            hit = self.index.module(full)
            if hit is None:
                return None
            self.modules[full] = hit
        return hit

    def class_of(self, src: SourceFile, fn: ast.FunctionDef) -> tuple[SourceFile, ast.ClassDef] | None:
        parent = src.parents.get(id(fn))
        return (src, parent) if isinstance(parent, ast.ClassDef) else None


class _LazyKernels(dict):
    """A library file's kernel facts, computed the first time a name of that file is resolved."""

    def __init__(self, index: LibraryIndex) -> None:
        super().__init__()
        self.index = index

    def get(self, path, default=None):  # type: ignore[override]
        hit = super().get(path)
        if hit is None:
            src = self.index.parsed(path)
            if src is None:
                return default
            hit = self[path] = self.index.kernels(src)
        return hit


def library_interpreter(index: LibraryIndex) -> _LibraryInterpreter:
    interp = getattr(index, "_interpreter", None)
    if interp is None:
        interp = _LibraryInterpreter(index)
        index._interpreter = interp  # type: ignore[attr-defined]
    return interp


def _paths_from(roots: dict[str, Val], max_depth: int = 4) -> dict[int, str]:
    """Buffer id -> the shortest path from a parameter that reaches it (breadth first)."""
    out: dict[int, str] = {}
    seen: set[int] = set()
    level: list[tuple[Val, str]] = [(v, name) for name, v in roots.items()]
    for _ in range(max_depth + 1):
        nxt: list[tuple[Val, str]] = []
        for v, path in level:
            if v.id in seen:
                continue
            seen.add(v.id)
            if v.buf is not None:
                out.setdefault(v.buf.id, path)
            for name, child in v.attrs.items():
                if not name.startswith("__"):
                    nxt.append((child, f"{path}.{name}"))
            for key, child in dict(v.items).items():
                if key.isdigit() or key.lstrip("-").isdigit():
                    nxt.append((child, f"{path}[{key}]"))
        level = nxt
    return out


def _callbacks(src: SourceFile, fn: ast.FunctionDef, params: list[str]) -> list[Op]:
    """Calls the library makes on what it was given: ``example.step()`` (method) or ``fn()`` (the
    value itself), read from the source (the parameter's name, wherever it is used), in line order."""
    found: list[tuple[int, int, Op]] = []
    names = set(params)
    # only calls inside ``fn`` can have it as their innermost function (not every call of the file)
    for node in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in names:
            root, method = f.value.id, f.attr
        elif isinstance(f, ast.Name) and f.id in names:
            root, method = f.id, ""
        else:
            continue
        enclosing = src.enclosing_functions(node)
        if not enclosing or enclosing[0] is not fn or method.startswith("_"):
            continue
        in_loop = False
        cur = src.parents.get(id(node))
        while cur is not None and cur is not fn:
            in_loop = in_loop or isinstance(cur, (ast.For, ast.While))
            cur = src.parents.get(id(cur))
        found.append((node.lineno, node.col_offset, Op("callback", method=method, binding={"target": root},
                                                          in_loop=in_loop)))
    return [op for *_, op in sorted(found, key=lambda t: (t[0], t[1]))]


def summarize(index: LibraryIndex, src: SourceFile, fn: ast.FunctionDef, qualname: str,
              is_method: bool) -> Summary | None:
    """Run a library function on unknown arguments and name what it reads and writes by paths."""
    interp = library_interpreter(index)
    interp.reset()
    interp.modules.setdefault(src.module_name, src)
    frame = _Frame(src, {}, fn=fn)
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    roots: dict[str, Val] = {}
    for i, name in enumerate(params):
        v = interp.new(name)
        if i == 0 and is_method:
            v.kind = "object"
            v.cls = interp.class_of(src, fn)
            frame.self_val = v
        roots[name] = frame.locals[name] = v
    for a in fn.args.kwonlyargs:
        roots[a.arg] = frame.locals[a.arg] = interp.new(a.arg)
    if fn.args.vararg:
        frame.locals[fn.args.vararg.arg] = interp.new(fn.args.vararg.arg, "list")
    if fn.args.kwarg:
        frame.locals[fn.args.kwarg.arg] = interp.new(fn.args.kwarg.arg)
    try:
        interp.run_body(fn, frame)
    except Exception:  # noqa: BLE001 - library code the interpreter cannot follow has no summary
        return None
    paths = _paths_from(roots)
    receiver = params[0] if is_method and params else None
    fresh: dict[int, str] = {}

    def path_of(buf: Buffer) -> str | None:
        p = paths.get(buf.id)
        if p is not None:
            return p
        if buf.fresh:
            return fresh.setdefault(buf.id, f"new:{len(fresh)}")
        return None

    ops: list[Op] = _callbacks(src, fn, [p for p in params if p != receiver])
    seen: set[str] = set()
    for ev in interp.events:
        op: Op | None = None
        if ev.kind == "launch":
            binding = {}
            for pname, b in ev.binding.items():
                p = path_of(b)
                if p is not None:
                    binding[pname] = p
            op = Op("launch", (ev.kernel.path, ev.kernel.name) if ev.kernel is not None else None,
                    str(ev.detail.get("kernel", "")), binding,
                    [p for b in ev.reads if (p := path_of(b))],
                    [p for b in ev.writes if (p := path_of(b))],
                    [p for b in ev.accums if (p := path_of(b))], conditional=bool(ev.branches))
        elif ev.kind in ("copy", "assign", "clone", "zero", "fill"):
            op = Op(ev.kind, reads=[p for b in ev.reads if (p := path_of(b))],
                    writes=[p for b in ev.writes if (p := path_of(b))])
        if op is None:
            continue
        key = json.dumps(op.to_json(), sort_keys=True)
        if key not in seen:  # loops unrolled twice repeat the same op
            seen.add(key)
            ops.append(op)
    binds: dict[str, str] = {}
    if receiver is not None:
        others = {v.id: name for name, v in roots.items() if name != receiver}
        for attr, v in roots[receiver].attrs.items():
            if v.id in others:
                binds[attr] = others[v.id]
    return Summary(qualname, [*params, *(a.arg for a in fn.args.kwonlyargs)], ops, binds)


class _SameItem(dict):
    """Items of ``[x] * n``: every index is the same object until one is rebound."""

    def __init__(self, only: Val) -> None:
        super().__init__()
        self.only = only

    def get(self, key, default=None):  # type: ignore[override]
        return super().get(key, self.only)

    def __getitem__(self, key):  # type: ignore[override]
        return super().get(key, self.only)


_EFFECT_WARP = {
    *_ALLOC, *_ALLOC_LIKE, *_LAUNCH, "clone", "copy", "Tape", "set_module_options",
}
_EFFECT_METHODS = {"zero_", "fill_", "assign", "backward", "zero", "reset", "append"}


def _library_names(src: SourceFile, library: LibraryIndex | None, own: set[str]) -> set[str]:
    """Local names the file binds to installed Warp-based packages (``import newton``) that are not
    part of the checked project (``own``: its module names)."""
    if library is None:
        return set()
    out = set()
    for mod, level, name, asname in src.project_imports:
        top = mod.split(".")[0]
        if level or not mod or top in own or not library.has_package(top):
            continue
        if name is None:
            out.add(asname or mod.split(".")[0])
        elif name != "*":
            out.add(asname or name)
    return out


def _effectful_functions(files: dict[str, SourceFile], library: LibraryIndex | None = None,
                         own: set[str] | frozenset[str] = frozenset()) -> set[int]:
    """Ids of the functions whose execution can produce an event: they (or a project function they
    call, by name) allocate, launch, copy, tape, zero, touch ``.grad`` or enter a ``with`` on a value.
    Everything else is not inlined: its effects on arrays are nil, and skipping it keeps the
    interpretation linear in the size of the code that matters."""
    defs: dict[str, list[int]] = {}
    calls: dict[int, set[str]] = {}
    direct: set[int] = set()
    for src in files.values():
        for fn in src.nodes_of(ast.FunctionDef):
            defs.setdefault(fn.name, []).append(id(fn))
            calls.setdefault(id(fn), set())
        libs = _library_names(src, library, set(own))
        for node in src.nodes_of(ast.Call, ast.Attribute, ast.With):
            hit = False
            called: str | None = None
            if isinstance(node, ast.Call):
                f = node.func
                wn = src.warp_name(f)
                root = f
                while isinstance(root, ast.Attribute):
                    root = root.value
                if wn is not None:
                    hit = wn.rpartition(".")[2] in _EFFECT_WARP or wn.split(".")[0] in _WARP_LIBRARIES
                elif isinstance(root, ast.Name) and root.id in libs:
                    hit = True  # a call into a Warp-based library: its summary may touch arrays
                elif isinstance(f, ast.Attribute):
                    hit = f.attr in _EFFECT_METHODS
                    called = f.attr
                elif isinstance(f, ast.Name):
                    called = f.id
                    inner = src.enclosing_functions(node)[:1]
                    # ``fn()`` on a parameter: a runner calling back what it was handed (``run(n, ex.step)``)
                    hit = bool(inner) and f.id in {a.arg for a in (*inner[0].args.posonlyargs, *inner[0].args.args,
                                                                    *inner[0].args.kwonlyargs)}
            elif isinstance(node, ast.Attribute):
                hit = node.attr in ("grad", "retain_grad", "requires_grad")
            else:
                hit = any(not isinstance(i.context_expr, ast.Call) for i in node.items)
            if not hit and called is None:
                continue
            for fn in src.enclosing_functions(node):
                if hit:
                    direct.add(id(fn))
                if called is not None:
                    calls.setdefault(id(fn), set()).add(called)
    effectful = set(direct)
    changed = True
    while changed:
        changed = False
        for fid, names in calls.items():
            if fid not in effectful and any(d in effectful for n in names for d in defs.get(n, ())):
                effectful.add(fid)
                changed = True
    return effectful


def _passes(n: int, run: int) -> list[int]:
    """The iterations a loop of ``n`` known trips runs: all of up to ``run + 1``, else the first ``run``
    and the last (so the last element of a state chain is written); one when not unrolling (``run`` 1)."""
    if run <= 1:
        return [0] if n > 0 else []
    return list(range(n)) if n <= run + 1 else [*range(run), n - 1]


def _is_place(node: ast.expr) -> bool:
    """An int literal, a name or an attribute chain on a name (evaluating it runs nothing)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int)
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _normalise_index(obj: Val, key: str) -> str:
    """``xs[-k]`` is ``xs[len(xs) - k]`` when the list's length is known."""
    if obj.length is not None and key.startswith("-") and key[1:].isdigit() and 0 < int(key[1:]) <= obj.length:
        return str(obj.length - int(key[1:]))
    return key


def _holds_array(v: Val) -> bool:
    """An array, or a list/tuple holding one (an optimizer's ``step([x.grad])``)."""
    if v.buf is not None:
        return True
    return v.kind == "list" and any(item.buf is not None for item in dict(v.items).values())


def _keyword_holds(e: ast.Call, when: str, n_positional: int, params: list[str]) -> bool:
    """An :class:`Op` condition at this call: ``"add"`` holds when ``add`` is passed a value other than
    a false literal (``False``, ``None``, ``0``), ``"!add"`` when it is not."""
    negate, name = when.startswith("!"), when.lstrip("!")
    node = next((k.value for k in e.keywords if k.arg == name), None)
    if node is None and name in params and params.index(name) < n_positional:
        node = e.args[params.index(name)]
    passed = node is not None and not (isinstance(node, ast.Constant) and not node.value)
    return passed != negate


def _is_contextmanager(src: SourceFile, fn: ast.FunctionDef) -> bool:
    """``fn`` is decorated with contextlib's ``contextmanager``, by the file's imports."""
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Name):
            if any(isinstance(n, ast.ImportFrom) and n.module == "contextlib"
                   and any(a.name == "contextmanager" and (a.asname or a.name) == dec.id for a in n.names)
                   for n in src.nodes_of(ast.ImportFrom)):
                return True
        elif isinstance(dec, ast.Attribute) and dec.attr == "contextmanager" and isinstance(dec.value, ast.Name):
            if any(a.name == "contextlib" and (a.asname or a.name) == dec.value.id
                   for n in src.nodes_of(ast.Import) for a in n.names):
                return True
    return False


def _is_name_chain(node: ast.expr) -> bool:
    """``x`` or ``x.a.b``: evaluating it calls nothing (short of a property)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _is_enumerate(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "enumerate"
            and bool(node.args))


def _is_super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _asks_for_grad(e: ast.Call) -> bool:
    """``requires_grad=True`` given literally."""
    return any(k.arg == "requires_grad" and _truthy(k.value) for k in e.keywords)


def _find_method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    """The first method ``name`` in the class body. The table of a class's methods is built once
    and kept on its node (library classes such as newton's ``ModelBuilder`` have hundreds, and
    are asked about at every call)."""
    table = cls.__dict__.get("_warpfix_methods")
    if table is None:
        table = {}
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef):
                table.setdefault(stmt.name, stmt)
        cls._warpfix_methods = table  # type: ignore[attr-defined]
    return table.get(name)


def _is_property(fn: ast.FunctionDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id in ("property", "cached_property"))
        or (isinstance(d, ast.Attribute) and d.attr == "cached_property")
        for d in fn.decorator_list
    )


def _is_static(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in fn.decorator_list)


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _truthy(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and bool(node.value)


_TEXT: dict[int, tuple[ast.AST, str]] = {}


def _text(node: ast.AST) -> str:
    """``ast.unparse`` with a cache per node (names are asked for many times per site)."""
    hit = _TEXT.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    if isinstance(node, ast.Name):
        text = node.id
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        text = f"{node.value.id}.{node.attr}"
    else:
        text = ast.unparse(node)
    if len(_TEXT) > 200_000:
        _TEXT.clear()
    _TEXT[id(node)] = (node, text)
    return text


def _callee_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"{_callee_name(func.value)}.{func.attr}"
    return type(func).__name__


def _label_of(e: ast.Call) -> str:
    return _text(e)[:60]


def _binop(op: ast.operator, a: object, b: object) -> int | None:
    if not (isinstance(a, int) and isinstance(b, int)):
        return None
    try:
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.FloorDiv):
            return a // b
        if isinstance(op, ast.Mod):
            return a % b
    except ZeroDivisionError:
        return None
    return None


def iter_roots(src: SourceFile) -> Iterator[tuple[ast.FunctionDef | ast.ClassDef, list[ast.FunctionDef]]]:
    """Top-level functions, and top-level classes with their methods: candidate roots."""
    for stmt in src.tree.body:
        if isinstance(stmt, ast.FunctionDef):
            yield stmt, []
        elif isinstance(stmt, ast.ClassDef):
            yield stmt, [sub for sub in stmt.body if isinstance(sub, ast.FunctionDef) and sub.name != "__init__"]
