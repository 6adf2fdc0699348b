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
from collections.abc import Collection
from dataclasses import dataclass, field

from warpfix.finding import Span
from warpfix.model.call_requests import CallRequests
from warpfix.model.host.calls import _accessor_return
from warpfix.model.host.syntax import _ALLOC, _ALLOC_LIKE, _LAUNCH, _WARP_LIBRARIES, _is_property
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
    """What a unit's code names (:mod:`warpfix.model.host.tape_roots`): sets while the file is read,
    tuples once it is summarised (:meth:`freeze`: a project has tens of thousands of units)."""

    seed: bool = False  # calls ``wp.Tape``
    warp_library: bool = False  # calls into ``wp.fem`` / ``wp.optim``
    names: Collection[str] = field(default_factory=set)
    chains: Collection[tuple[tuple[str, ...], str]] = field(default_factory=set)  # ``a.b.c``: (("a", "b"), "c")
    attrs: Collection[str] = field(default_factory=set)
    called: Collection[str] = field(default_factory=set)  # attribute names called (``x.m()``)
    local_classes: Collection[Key] = field(default_factory=list)

    def freeze(self) -> None:
        self.names, self.chains, self.attrs = tuple(self.names), tuple(self.chains), tuple(self.attrs)
        self.called, self.local_classes = tuple(self.called), tuple(self.local_classes)


# The calls, attributes and ``with`` statements of the file's function bodies, for the effect
# linker, by what they do: (a direct effect, the project functions a call may run, the name its
# receiver chain starts from) -> the functions they sit in (with the functions around those). A
# call whose receiver names a Warp-based library is a direct effect whatever the rest says.
Effects = dict[tuple[bool, "Request | None", "str | None"], set["Key"]]


@dataclass(slots=True)
class FileSummary:
    path: str
    index: dict[str, tuple]  # module level: name -> ("def", key) | ("class", key) | ("const", value)
    classes: dict[Key, ClassInfo]
    functions: dict[str, list[Key]]  # ``def``s not directly in a class body, by name (any depth)
    methods: dict[str, list[Key]]  # ``def``s directly in a class body, by name
    effects: Effects
    units: dict[Key, UnitFacts]  # the module body, module-level functions, methods, class headers
    # candidate roots in order (``iter_roots``): a module-level def, or a class and its methods but __init__
    roots: list[tuple[Key, tuple[Key, ...]]]
    properties: set[str]  # names of ``@property`` getters of its classes
    # small accessors (one ``return`` of names and attributes): the interpreter evaluates what they
    # return even when it does not inline them (``calls._accessor_return``)
    accessors: set[Key] = field(default_factory=set)
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


def summarize(src: SourceFile) -> FileSummary:
    """The summary of ``src`` (reads its tree; the tree may be released afterwards)."""
    return _Summarizer(src).run()


def summarize_with_definitions(src: SourceFile) -> tuple[FileSummary, list[ast.FunctionDef | ast.ClassDef]]:
    """:func:`summarize`, and the file's ``def`` and ``class`` statements in ``ast.walk`` order
    (what :func:`warpfix.model.kernels.find_kernels` looks at), from the same pass."""
    summarizer = _Summarizer(src)
    summary = summarizer.run()
    return summary, [d for d in summarizer.defs if d.__class__ is not ast.AsyncFunctionDef]  # type: ignore[misc]


class _Summarizer(CallRequests):
    """One breadth-first pass over the tree (each node's unit and enclosing functions are known
    when it is reached: a node gets its parent's, except where a definition starts a new one), then
    the facts that need the whole file (its warp names, the names its functions assign)."""

    def __init__(self, src: SourceFile) -> None:
        self.src = src
        self.path = src.path
        self.owners: dict[int, ast.ClassDef] = {}  # id(def directly in a class body) -> the class
        self.local_defs: dict[int, dict[str, ast.FunctionDef]] = {}
        self.param_names: dict[int, frozenset[str]] = {}
        self.stores: dict[int | None, set[str]] = {}
        self.keys: dict[int, Key] = {}
        self.defs: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = []  # breadth first
        self.calls: list[tuple[ast.Call, UnitFacts, tuple[ast.AST, ...]]] = []
        self.effect_nodes: list[tuple[ast.Attribute | ast.With, tuple[ast.AST, ...]]] = []
        self.imports: list[ast.Import | ast.ImportFrom] = []
        self.nested: set[int] = set()  # ids of the functions a function is defined in (at any depth)

    def key(self, node: ast.AST) -> Key:
        """One key object per definition (a summary names each many times)."""
        hit = self.keys.get(id(node))
        if hit is None:
            hit = self.keys[id(node)] = (self.path, node.lineno, node.col_offset)  # type: ignore[attr-defined]
        return hit

    def run(self) -> FileSummary:
        src, tree = self.src, self.src.tree
        out = FileSummary(src.path, self._index(tree), {}, {}, {}, {}, {}, [], set())
        self._walk(out)
        if not src.indexed:
            src.set_imports(self.imports)  # the warp names the calls below are read with
        self._definitions(out)
        self._calls(out)
        if src.warp:
            self._backward_switches(out)
        out.module_imports = module_imports(src)
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                out.roots.append((self.key(stmt), ()))
            elif isinstance(stmt, ast.ClassDef):
                out.roots.append((self.key(stmt), tuple(
                    self.key(m) for m in stmt.body if isinstance(m, ast.FunctionDef) and m.name != "__init__")))
        for unit in out.units.values():
            unit.freeze()
        return out

    def _walk(self, out: FileSummary) -> None:
        """Every node once, breadth first, with its unit and the functions around it (innermost
        first): the names and attributes each unit uses, the names each function assigns, and the
        definitions, calls, ``with`` statements and imports for the passes after it."""
        tree = self.src.tree
        module_unit = out.units[out.module_key()] = UnitFacts()
        nodes: list[ast.AST] = [tree]
        # each node's (unit, functions around it): one pair per stretch of code, shared by its nodes
        ctxs: list[tuple[UnitFacts, tuple[ast.AST, ...]]] = [(module_unit, ())]
        stores, defs, calls, effect_nodes = self.stores, self.defs, self.calls, self.effect_nodes
        Name, Attribute, Call, FunctionDef, AsyncFunctionDef, ClassDef = (
            ast.Name, ast.Attribute, ast.Call, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        Store, With, Import, ImportFrom, AST, Constant = (
            ast.Store, ast.With, ast.Import, ast.ImportFrom, ast.AST, ast.Constant)
        top = {id(stmt) for stmt in tree.body}  # a class defined here is named, not local
        child_fields = _CHILD_FIELDS
        nested = self.nested
        append_node, append_ctx = nodes.append, ctxs.append
        i = 0
        while i < len(nodes):
            node = nodes[i]
            cls = node.__class__
            if cls is Constant:
                i += 1
                continue
            ctx = ctxs[i]
            i += 1
            if cls is Name:
                ctx[0].names.add(node.id)  # type: ignore[attr-defined, union-attr]
                if node.ctx.__class__ is Store:  # type: ignore[attr-defined]
                    scope = ctx[1]
                    stores.setdefault(id(scope[0]) if scope else None, set()).add(node.id)  # type: ignore[attr-defined]
                continue  # its only child is the context
            if cls is Attribute:
                unit = ctx[0]
                attr = node.attr  # type: ignore[attr-defined]
                unit.attrs.add(attr)  # type: ignore[union-attr]
                chain = _name_chain(node.value)  # type: ignore[attr-defined]
                if chain is not None:
                    unit.chains.add((chain, attr))  # type: ignore[union-attr]
                if attr in GRAD_ATTRS and ctx[1]:
                    effect_nodes.append((node, ctx[1]))  # type: ignore[arg-type]
            elif cls is Call:
                calls.append((node, *ctx))  # type: ignore[arg-type]
                if node.func.__class__ is Attribute:  # type: ignore[attr-defined]
                    ctx[0].called.add(node.func.attr)  # type: ignore[attr-defined, union-attr]
            elif cls is FunctionDef or cls is AsyncFunctionDef:
                defs.append(node)  # type: ignore[arg-type]
                unit, scope = ctx
                nested.update(id(fn) for fn in scope)  # the functions it is defined in
                ctx = (unit, (node, *scope))  # its children run inside it
            elif cls is ClassDef:
                defs.append(node)  # type: ignore[arg-type]
                unit, scope = ctx
                header = out.units[self.key(node)] = UnitFacts()  # its base expressions
                if id(node) not in top:
                    unit.local_classes.append(self.key(node))  # type: ignore[union-attr]
                for stmt in node.body:  # type: ignore[attr-defined]
                    append_node(stmt)
                    if stmt.__class__ is FunctionDef or stmt.__class__ is AsyncFunctionDef:
                        self.owners[id(stmt)] = node  # type: ignore[assignment]
                    if stmt.__class__ is FunctionDef:  # a method: a unit of its own
                        append_ctx((out.units.setdefault(self.key(stmt), UnitFacts()), scope))
                    else:
                        append_ctx(ctx)  # the class body runs with the code that defines it
                header_ctx = (header, scope)
                for expr in (*node.bases, *node.keywords):  # type: ignore[attr-defined]
                    append_node(expr)
                    append_ctx(header_ctx)
                for expr in node.decorator_list:  # type: ignore[attr-defined]
                    append_node(expr)
                    append_ctx(ctx)
                continue
            elif cls is With:
                if ctx[1]:
                    effect_nodes.append((node, ctx[1]))  # type: ignore[arg-type]
            elif cls is Import or cls is ImportFrom:
                self.imports.append(node)  # type: ignore[arg-type]
            elif node is tree:
                for stmt in tree.body:
                    append_node(stmt)
                    if stmt.__class__ is FunctionDef:  # a module-level function: a unit of its own
                        append_ctx((out.units.setdefault(self.key(stmt), UnitFacts()), ()))
                    else:
                        append_ctx(ctx)
                continue
            fields = child_fields.get(cls)
            if fields is None:
                fields = child_fields[cls] = _child_fields(cls)
            for name in fields:
                value = getattr(node, name, None)
                if value.__class__ is list:
                    for child in value:
                        if isinstance(child, AST):
                            append_node(child)
                            append_ctx(ctx)
                elif isinstance(value, AST):
                    append_node(value)
                    append_ctx(ctx)

    def _calls(self, out: FileSummary) -> None:
        """What the calls tell: a unit calls ``wp.Tape()`` or into ``wp.fem`` / ``wp.optim``; and, in
        a function body, the effect linker's part (:data:`Effects`). ``with`` statements and
        ``.grad`` attributes of function bodies are direct effects."""
        src = self.src
        effects = out.effects

        def add(scope: tuple[ast.AST, ...], what: tuple[bool, Request | None, str | None]) -> None:
            fns = effects.get(what)
            if fns is None:
                fns = effects[what] = set()
            fns.update(self.key(fn) for fn in scope)

        check = bool(src.warp)
        for node, unit, scope in self.calls:
            f = node.func
            wn = src.warp_name(f) if check else None
            if wn is not None:
                last, first = wn.rpartition(".")[2], wn.split(".")[0]
                if last == "Tape":
                    unit.seed = True
                if first in _WARP_LIBRARIES:
                    unit.warp_library = True
                if scope and (last in EFFECT_WARP or first in _WARP_LIBRARIES):
                    add(scope, (True, None, None))
                continue
            if not scope:
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
                add(scope, (hit, request, library_root))
        for node, scope in self.effect_nodes:
            if isinstance(node, ast.Attribute) or any(not isinstance(i.context_expr, ast.Call) for i in node.items):
                add(scope, (True, None, None))  # ``.grad``, ``.retain_grad``, ``.requires_grad``; ``with v:``

    def _backward_switches(self, out: FileSummary) -> None:
        """Where the file switches off backward code generation (see :class:`FileSummary`)."""
        src = self.src
        for node, _unit, _scope in self.calls:
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
        for fn in self.defs:
            if fn.__class__ is ast.FunctionDef:
                (out.methods if id(fn) in self.owners else out.functions).setdefault(
                    fn.name, []).append(self.key(fn))
                if _accessor_return(fn) is not None:  # type: ignore[arg-type]
                    out.accessors.add(self.key(fn))
        for cls in self.defs:
            if cls.__class__ is not ast.ClassDef:
                continue
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


# fields that never hold a node to look into: a name, a context or operator singleton, a flag
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "name", "arg", "kind", "type_comment", "module",
                          "level", "asname", "is_async", "conversion"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}


def _child_fields(cls: type) -> tuple[str, ...]:
    return tuple(f for f in cls._fields if f not in _LEAF_FIELDS)  # type: ignore[attr-defined]
