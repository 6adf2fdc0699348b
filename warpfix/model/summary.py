"""What one file contributes to the project-wide analyses, read from its syntax tree once and kept
without it: its module-level names, its classes, the calls that make a function effectful, and what
each unit of code names (for :mod:`warpfix.model.host.tape_roots`).

Definitions are named by :data:`Key` (path, line, column of the ``def``/``class``), not by node,
so a check can release a file's tree after summarising it and parse it again only if an analysis
looks into it (:meth:`warpfix.model.source.SourceFile.release`). What a summary holds is exactly
what the node-based analyses it replaces read: the module index the interpreter builds
(``HostInterpreter.module_index``), and, for each call of a function body, the part of the
effect linker's resolution (:mod:`warpfix.model.host.linker`) that needs only this file."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from warpfix.finding import Span
from warpfix.model.host.syntax import _ALLOC, _ALLOC_LIKE, _LAUNCH, _WARP_LIBRARIES, _is_property, _is_static
from warpfix.model.import_order import module_imports
from warpfix.model.source import SourceFile

Key = tuple[str, int, int]  # (path, line, column) of a ``def`` or ``class``
MODULE_LINE = (0, -1)  # line and column of a module body's unit key

EFFECT_WARP = frozenset({*_ALLOC, *_ALLOC_LIKE, *_LAUNCH, "clone", "copy", "Tape", "set_module_options"})
EFFECT_METHODS = frozenset({"zero_", "fill_", "assign", "backward", "zero", "reset"})
GRAD_ATTRS = frozenset({"grad", "retain_grad", "requires_grad"})

# A call of a function body, resolved as far as this file allows (see :func:`_request`):
#   ("keys", (key, ...))          a function defined in an enclosing function
#   ("name", name, is_local)      a name: the module's definition, and any project function of that
#                                 name where a local (or an unresolved global) may hold one
#   ("methods", name)             any project method of that name
#   ("super", class key, name)    ``super().name()`` in a method of that class
#   ("overrides", class key, name)  ``self.name()``: the class, its bases and its subclasses
#   ("global", receiver, name, stored)  ``mod.f()`` / ``Cls.m()`` / ``np.f()`` on a module-level name
Request = tuple


@dataclass(slots=True)
class ClassInfo:
    key: Key
    name: str
    methods: dict[str, Key]  # the first ``def`` of each name in the body (``_find_method``)
    defs: tuple[tuple[str, Key, bool], ...]  # every ``def`` of the body: (name, key, is a property)
    bases: tuple[tuple[str, ...], ...]  # base expressions that are name chains: ``mod.Base`` -> ("mod", "Base")


@dataclass(slots=True)
class UnitFacts:
    """What a unit's code names (:mod:`warpfix.model.host.tape_roots`)."""

    seed: bool = False  # calls ``wp.Tape``
    warp_library: bool = False  # calls into ``wp.fem`` / ``wp.optim``
    names: set[str] = field(default_factory=set)
    chains: list[tuple[tuple[str, ...], str]] = field(default_factory=list)  # ``a.b.c``: (("a", "b"), "c")
    attrs: set[str] = field(default_factory=set)
    called: set[str] = field(default_factory=set)  # attribute names called (``x.m()``)
    local_classes: list[Key] = field(default_factory=list)


@dataclass(slots=True)
class Effect:
    """One call, attribute or ``with`` in a function body, for the effect linker."""

    scope: tuple[Key, ...]  # the functions around it, innermost first
    hit: bool  # a direct effect (unless ``library_root`` names a library: then one anyway)
    request: Request | None  # the project functions it may call
    library_root: str | None = None  # the name a call's receiver chain starts from


@dataclass(slots=True)
class FileSummary:
    path: str
    index: dict[str, tuple]  # module level: name -> ("def", key) | ("class", key) | ("const", value)
    classes: dict[Key, ClassInfo]
    functions: dict[str, list[Key]]  # ``def``s not directly in a class body, by name (any depth)
    methods: dict[str, list[Key]]  # ``def``s directly in a class body, by name
    effects: list[Effect]
    units: dict[Key, UnitFacts]  # the module body, module-level functions, methods, class headers
    # candidate roots in order (``iter_roots``): a module-level def, or a class and its methods but __init__
    roots: list[tuple[Key, tuple[Key, ...]]]
    properties: set[str]  # names of ``@property`` getters of its classes
    # where the file switches backward code generation off: its own module options
    # (``wp.set_module_options({"enable_backward": False})``, the first call), and module-level
    # ``wp.config.enable_backward = False`` statements (:mod:`warpfix.rules.wf202_backward_disabled`)
    module_options_off: Span | None = None
    config_off: list[Span] = field(default_factory=list)
    # the module body switches it off either way (:func:`warpfix.model.reach.backward_disabled_files`)
    backward_off: bool = False
    # (line, dotted names) of each module-level import (:class:`warpfix.model.import_order.ImportOrder`)
    module_imports: list[tuple[int, list[str]]] = field(default_factory=list)

    def module_key(self) -> Key:
        return (self.path, *MODULE_LINE)


def key_of(path: str, node: ast.AST) -> Key:
    return (path, node.lineno, node.col_offset)  # type: ignore[attr-defined]


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def summarize(src: SourceFile) -> FileSummary:
    """The summary of ``src`` (reads its tree; the tree may be released afterwards)."""
    return _Summarizer(src).run()


class _Summarizer:
    def __init__(self, src: SourceFile) -> None:
        self.src = src
        self.path = src.path
        self.parents = src.parents
        self.local_defs: dict[int, dict[str, ast.FunctionDef]] = {}
        self.stores: dict[int | None, set[str]] = {}

    def key(self, node: ast.AST) -> Key:
        return (self.path, node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def run(self) -> FileSummary:
        src, tree = self.src, self.src.tree
        out = FileSummary(src.path, self._index(tree), {}, {}, {}, [], {}, [], set())
        self._definitions(out)
        scopes = self._scopes_and_units(out)
        self._effects(out, scopes)
        if src.warp:
            self._backward_switches(out)
        out.module_imports = module_imports(src)
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                out.roots.append((self.key(stmt), ()))
            elif isinstance(stmt, ast.ClassDef):
                out.roots.append((self.key(stmt), tuple(
                    self.key(m) for m in stmt.body if isinstance(m, ast.FunctionDef) and m.name != "__init__")))
        return out

    def _backward_switches(self, out: FileSummary) -> None:
        """Where the file switches off backward code generation (see :class:`FileSummary`)."""
        src = self.src
        for node in src.nodes_of(ast.Call):
            if not src.is_warp(node.func, "set_module_options"):
                continue
            if any(kw.arg == "module" for kw in node.keywords) or len(node.args) > 1:
                continue
            if _sets_backward_off(node.args[0] if node.args else None):
                out.module_options_off = src.span(node)
                break
        for stmt in src.tree.body:
            if isinstance(stmt, ast.Assign) and _is_false(stmt.value) and any(
                    src.warp_name(t) == "config.enable_backward" for t in stmt.targets):
                out.config_off.append(src.span(stmt))
                out.backward_off = True
            elif (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                  and src.is_warp(stmt.value.func, "set_module_options") and stmt.value.args
                  and _sets_backward_off(stmt.value.args[0])):
                out.backward_off = True

    def _index(self, tree: ast.Module) -> dict[str, tuple]:
        """Module-level definitions and int/str constants, as ``HostInterpreter.module_index``."""
        index: dict[str, tuple] = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                index[stmt.name] = ("def", self.key(stmt))
            elif isinstance(stmt, ast.ClassDef):
                index[stmt.name] = ("class", self.key(stmt))
            elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        index[t.id] = ("const", stmt.value.value)
        return index

    def _definitions(self, out: FileSummary) -> None:
        parents = self.parents
        for fn in self.src.nodes_of(ast.FunctionDef):
            owner = parents.get(id(fn))
            (out.methods if isinstance(owner, ast.ClassDef) else out.functions).setdefault(
                fn.name, []).append(self.key(fn))
        for cls in self.src.nodes_of(ast.ClassDef):
            methods: dict[str, Key] = {}
            defs = []
            for stmt in cls.body:
                if isinstance(stmt, ast.FunctionDef):
                    methods.setdefault(stmt.name, self.key(stmt))
                    prop = _is_property(stmt)
                    defs.append((stmt.name, self.key(stmt), prop))
                    if prop:
                        out.properties.add(stmt.name)
            bases = tuple(chain for b in cls.bases if (chain := _name_chain(b)) is not None)
            out.classes[self.key(cls)] = ClassInfo(self.key(cls), cls.name, methods, tuple(defs), bases)

    # ---------------------------------------------------------------- one pass: scopes and units
    def _scopes_and_units(self, out: FileSummary) -> dict[int, tuple[ast.AST, ...]]:
        """The functions around every node (innermost first, by id), the names each function
        assigns, and the units' facts, in one breadth-first pass (a node's parent comes first)."""
        src, tree, parents = self.src, self.src.tree, self.parents
        module_unit = out.units[out.module_key()] = UnitFacts()
        unit_of: dict[int, UnitFacts] = {id(tree): module_unit}
        scope_of: dict[int, tuple[ast.AST, ...]] = {id(tree): ()}
        check_calls = bool(src.warp)
        for node in src.nodes:
            cls = node.__class__
            if cls is ast.Module:
                continue
            parent = parents[id(node)]
            scope = scope_of.get(id(parent))
            if scope is None:  # a shared singleton (``ast.Load()``, an operator): no children, no facts
                continue
            pcls = parent.__class__
            if pcls is ast.FunctionDef or pcls is ast.AsyncFunctionDef:
                scope = (parent, *scope)
            scope_of[id(node)] = scope
            if cls is ast.FunctionDef and (pcls is ast.ClassDef or parent is tree):
                unit = out.units[self.key(node)] = UnitFacts()
            elif pcls is ast.ClassDef and (node in parent.bases or node in parent.keywords):  # type: ignore[attr-defined]
                unit = out.units[self.key(parent)]
            else:
                unit = unit_of[id(parent)]
            unit_of[id(node)] = unit
            if cls is ast.Name:
                unit.names.add(node.id)  # type: ignore[attr-defined]
                if isinstance(node.ctx, ast.Store):  # type: ignore[attr-defined]
                    self.stores.setdefault(id(scope[0]) if scope else None, set()).add(node.id)  # type: ignore[attr-defined]
            elif cls is ast.Attribute:
                unit.attrs.add(node.attr)  # type: ignore[attr-defined]
                chain = _name_chain(node.value)  # type: ignore[attr-defined]
                if chain is not None:
                    unit.chains.append((chain, node.attr))  # type: ignore[attr-defined]
            elif cls is ast.Call:
                func = node.func  # type: ignore[attr-defined]
                if func.__class__ is ast.Attribute:
                    unit.called.add(func.attr)
                wn = src.warp_name(func) if check_calls else None
                if wn is not None:
                    if wn.rpartition(".")[2] == "Tape":
                        unit.seed = True
                    if wn.split(".")[0] in _WARP_LIBRARIES:
                        unit.warp_library = True
            elif cls is ast.ClassDef:
                out.units[self.key(node)] = UnitFacts()  # its base expressions
                if parent is not tree:
                    unit.local_classes.append(self.key(node))
        return scope_of

    # ---------------------------------------------------------------- the effect linker's part
    def _effects(self, out: FileSummary, scope_of: dict[int, tuple[ast.AST, ...]]) -> None:
        src = self.src
        for node in src.nodes_of(ast.Call, ast.Attribute, ast.With):
            if isinstance(node, ast.Attribute) and node.attr not in GRAD_ATTRS:
                continue
            scope = scope_of.get(id(node))
            if not scope:
                continue
            keys = tuple(self.key(fn) for fn in scope)
            if isinstance(node, ast.Call):
                f = node.func
                wn = src.warp_name(f)
                if wn is not None:
                    hit = wn.rpartition(".")[2] in EFFECT_WARP or wn.split(".")[0] in _WARP_LIBRARIES
                    if hit:
                        out.effects.append(Effect(keys, True, None))
                    continue
                root = f
                while isinstance(root, ast.Attribute):
                    root = root.value
                hit = isinstance(f, ast.Attribute) and f.attr in EFFECT_METHODS
                request = self._request(node, scope)
                if request is None:  # a call of what the function was handed: an effect of its own
                    hit, request = True, None
                elif request == ():
                    request = None
                library_root = root.id if isinstance(root, ast.Name) else None
                if hit or request is not None or library_root is not None:
                    out.effects.append(Effect(keys, hit, request, library_root))
            elif isinstance(node, ast.Attribute):
                out.effects.append(Effect(keys, True, None))  # ``.grad``, ``.retain_grad``, ``.requires_grad``
            elif any(not isinstance(i.context_expr, ast.Call) for i in node.items):
                out.effects.append(Effect(keys, True, None))

    def _request(self, call: ast.Call, scope: tuple[ast.AST, ...]) -> Request | None:
        """The file's part of ``_Links.callees``: () for no project function, None for a call of a
        parameter (a callback: an effect of its own)."""
        f = call.func
        if isinstance(f, ast.Name):
            name = f.id
            inner = scope[0]
            if name in _params(inner):  # type: ignore[arg-type]
                # a classmethod's ``cls(...)`` constructs its class, as ``Cls(...)`` would
                return () if self._cls_param(inner, name) else None
            for fn in scope:
                local = self._local_def(fn, name)  # type: ignore[arg-type]
                if local is not None:
                    return ("keys", (self.key(local),))
            return ("name", name, self._is_local(name, scope))
        if not isinstance(f, ast.Attribute):
            return ()
        recv, name = f.value, f.attr
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super":
            cls = self._method_class(scope)
            return ("methods", name) if cls is None else ("super", self.key(cls), name)
        if isinstance(recv, ast.Name):
            cls = self._self_class(scope[0], recv.id)  # type: ignore[arg-type]
            if cls is not None:
                return ("overrides", self.key(cls), name)
            if not self._is_local(recv.id, scope):
                return ("global", recv.id, name, recv.id in self.stores.get(None, ()))
        return ("methods", name)

    def _is_local(self, name: str, scope: tuple[ast.AST, ...]) -> bool:
        """A parameter or a name some enclosing function assigns (it shadows the module's)."""
        return any(name in _params(fn) or name in self.stores.get(id(fn), ()) for fn in scope)  # type: ignore[arg-type]

    def _local_def(self, fn: ast.FunctionDef, name: str) -> ast.FunctionDef | None:
        """The function ``name`` defined in ``fn``'s body (not in a nested class or function)."""
        table = self.local_defs.get(id(fn))
        if table is None:
            table = self.local_defs[id(fn)] = {}
            todo = list(fn.body)
            while todo:
                stmt = todo.pop()
                if isinstance(stmt, ast.FunctionDef):
                    table.setdefault(stmt.name, stmt)
                elif not isinstance(stmt, (ast.ClassDef, ast.AsyncFunctionDef)):
                    todo.extend(c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.stmt))
        return table.get(name)

    def _method_class(self, scope: tuple[ast.AST, ...]) -> ast.ClassDef | None:
        for fn in scope:
            owner = self.parents.get(id(fn))
            if isinstance(owner, ast.ClassDef):
                return owner
        return None

    def _self_class(self, fn: ast.FunctionDef, name: str) -> ast.ClassDef | None:
        """The class whose instance ``name`` is: the first parameter of the method ``fn`` (a closure
        inside a method does not see it: the interpreter runs nested functions on their own frame)."""
        owner = self.parents.get(id(fn))
        if (isinstance(owner, ast.ClassDef) and not _is_static(fn) and fn.args.args
                and fn.args.args[0].arg == name and not fn.args.posonlyargs):
            return owner
        return None

    def _cls_param(self, fn: ast.AST, name: str) -> bool:
        """``name`` is a classmethod's first parameter (``cls(value)`` constructs the class)."""
        owner = self.parents.get(id(fn))
        return bool(isinstance(owner, ast.ClassDef) and isinstance(fn, ast.FunctionDef) and fn.args.args
                    and fn.args.args[0].arg == name
                    and any(isinstance(d, ast.Name) and d.id == "classmethod" for d in fn.decorator_list))


def _name_chain(e: ast.expr) -> tuple[str, ...] | None:
    """``a.b.c`` -> ("a", "b", "c"); None for anything but a name and attributes on it."""
    parts: list[str] = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if not isinstance(e, ast.Name):
        return None
    parts.append(e.id)
    parts.reverse()
    return tuple(parts)


def _is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _sets_backward_off(opts: ast.expr | None) -> bool:
    """``{... "enable_backward": False ...}``."""
    return isinstance(opts, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value == "enable_backward" and _is_false(v)
        for k, v in zip(opts.keys, opts.values, strict=True))
