"""Which project functions can produce an event at all (the others are never inlined).

A function is *effectful* when its body (nested definitions included) allocates, launches, copies,
opens a tape, zeroes, touches ``.grad``, enters a ``with`` on a value, calls into a Warp-based
library or calls what it was handed; or when it calls an effectful function. Growing a list
(``xs.append(v)``) is not an effect, any more than ``self.x = v`` is: both only change values.

Calls are linked to definitions the way the interpreter resolves them: a name by the module's
definitions and imports (and by name, for a local the interpreter may have bound to a function);
``self.m()`` to ``m`` of the method's class, its bases and its subclasses; ``super().m()`` to the
bases; ``mod.f()`` and ``Cls.m()`` through the import; a method of an unknown global (``np.f()``)
only to the one project method the interpreter would guess; a method of any other receiver to
every project method of that name (it may be an instance of any project class). A constructor
call ``Cls()`` is not linked to ``__init__`` (it never was: linking it turns off the WF601 finding
of ``golden/WF601-attribute-loss``, which needs a look of its own)."""

from __future__ import annotations

import ast
import builtins
from typing import Protocol

from warpfix.model.host.syntax import _ALLOC, _ALLOC_LIKE, _LAUNCH, _WARP_LIBRARIES, _find_method, _is_static
from warpfix.model.library import LibraryIndex
from warpfix.model.source import SourceFile

_EFFECT_WARP = {
    *_ALLOC, *_ALLOC_LIKE, *_LAUNCH, "clone", "copy", "Tape", "set_module_options",
}
_EFFECT_METHODS = {"zero_", "fill_", "assign", "backward", "zero", "reset"}
_BUILTINS = frozenset(dir(builtins))
_GRAD_ATTRS = frozenset({"grad", "retain_grad", "requires_grad"})

Target = tuple[SourceFile, ast.AST]  # a module-level definition (def or class), or a module (its tree)


class Resolver(Protocol):
    """The interpreter's static name resolution (:class:`~warpfix.model.host.interpreter.HostInterpreter`)."""

    def module_index(self, src: SourceFile) -> tuple[dict[str, tuple], list[tuple[str, int]]]: ...

    def resolve_module(self, src: SourceFile, mod: str, level: int) -> SourceFile | None: ...


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


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


class _Scopes:
    """The nodes of a file the effect summary looks at, each with the functions around it (innermost
    first), and the names each function assigns (``None``: the module body). The functions around a
    node are found once per ancestor, not once per node."""

    def __init__(self, src: SourceFile) -> None:
        self.parents = src.parents
        self.memo: dict[int, list[ast.FunctionDef]] = {id(src.tree): []}
        self.nodes = [(n, scope) for n in src.nodes_of(ast.Call, ast.Attribute, ast.With)
                      if (not isinstance(n, ast.Attribute) or n.attr in _GRAD_ATTRS) and (scope := self.around(n))]
        self.stores: dict[int | None, set[str]] = {}
        for n in src.nodes_of(ast.Name):
            if isinstance(n.ctx, ast.Store):
                scope = self.around(n)
                self.stores.setdefault(id(scope[0]) if scope else None, set()).add(n.id)

    def around(self, node: ast.AST) -> list[ast.FunctionDef]:
        path = []
        cur = self.parents.get(id(node))
        while cur is not None and id(cur) not in self.memo:
            path.append(cur)
            cur = self.parents.get(id(cur))
        scope = self.memo[id(cur)] if cur is not None else []
        for anc in reversed(path):
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope = [anc, *scope]  # type: ignore[list-item]
            self.memo[id(anc)] = scope
        return scope

    def is_local(self, name: str, scope: list[ast.FunctionDef]) -> bool:
        """A parameter or a name some enclosing function assigns (it shadows the module's)."""
        return any(name in _params(fn) or name in self.stores.get(id(fn), ()) for fn in scope)


class ModuleNames:
    """Module-level names and ``module.name`` chains resolved to project definitions, by the
    interpreter's module resolution."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver

    def lookup(self, src: SourceFile, name: str, depth: int = 0) -> Target | None:
        """What a module-level name of ``src`` is (as ``HostInterpreter.defined_global`` finds it)."""
        if depth > 8:
            return None
        index, stars = self.resolver.module_index(src)
        entry = index.get(name)
        if entry is None:
            for mod, level in stars:
                target = self.resolver.resolve_module(src, mod, level)
                if target is not None and not name.startswith("_"):
                    hit = self.lookup(target, name, depth + 1)
                    if hit is not None:
                        return hit
            return None
        kind = entry[0]
        if kind in ("def", "class"):
            return src, entry[1]
        if kind == "module":
            target = self.resolver.resolve_module(src, entry[1], entry[2])
            return (target, target.tree) if target is not None else None
        if kind == "from":
            _, mod, level, orig = entry
            target = self.resolver.resolve_module(src, mod, level)
            if target is not None:
                return self.lookup(target, orig, depth + 1)
            sub = self.resolver.resolve_module(src, f"{mod}.{orig}" if mod else orig, level)
            return (sub, sub.tree) if sub is not None else None
        return None

    def expr_target(self, src: SourceFile, e: ast.expr) -> Target | None:
        """A name or ``module.name`` chain resolved to a definition or module."""
        if isinstance(e, ast.Name):
            return self.lookup(src, e.id)
        if isinstance(e, ast.Attribute):
            owner = self.expr_target(src, e.value)
            if owner is not None and isinstance(owner[1], ast.Module):
                return self.lookup(owner[0], e.attr)
        return None


class _Links(ModuleNames):
    """Call sites resolved to project definitions, by the interpreter's module resolution."""

    def __init__(self, files: dict[str, SourceFile], resolver: Resolver) -> None:
        super().__init__(resolver)
        self.methods: dict[str, list[int]] = {}  # method name -> ids of every class-body def of that name
        self.functions: dict[str, list[int]] = {}  # name -> ids of every def that is not a method
        self.subclasses: dict[int, list[ast.ClassDef]] = {}
        self.class_file: dict[int, SourceFile] = {}
        self.local_defs: dict[int, dict[str, ast.FunctionDef]] = {}  # id(function) -> the defs in its body
        for src in files.values():
            for fn in src.nodes_of(ast.FunctionDef):
                owner = src.parents.get(id(fn))
                (self.methods if isinstance(owner, ast.ClassDef) else self.functions).setdefault(
                    fn.name, []).append(id(fn))
            for cls in src.nodes_of(ast.ClassDef):
                self.class_file[id(cls)] = src
        for src in files.values():
            for cls in src.nodes_of(ast.ClassDef):
                for base in self.bases(src, cls):
                    self.subclasses.setdefault(id(base[1]), []).append(cls)

    def bases(self, src: SourceFile, cls: ast.ClassDef) -> list[tuple[SourceFile, ast.ClassDef]]:
        out = []
        for base in cls.bases:
            hit = self.expr_target(src, base)
            if hit is not None and isinstance(hit[1], ast.ClassDef) and hit[1] is not cls:
                out.append((hit[0], hit[1]))
        return out

    def find(self, src: SourceFile, cls: ast.ClassDef, name: str, depth: int = 0) -> ast.FunctionDef | None:
        fn = _find_method(cls, name)
        if fn is not None or depth > 8:
            return fn
        for bsrc, base in self.bases(src, cls):
            hit = self.find(bsrc, base, name, depth + 1)
            if hit is not None:
                return hit
        return None

    def overrides(self, cls: ast.ClassDef, name: str) -> list[int]:
        """``name`` as the class, its bases and every project subclass define it (``self.name()``)."""
        out: list[int] = []
        found = self.find(self.class_file[id(cls)], cls, name)
        if found is not None:
            out.append(id(found))
        todo, seen = list(self.subclasses.get(id(cls), ())), {id(cls)}
        while todo:
            sub = todo.pop()
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            fn = _find_method(sub, name)
            if fn is not None:
                out.append(id(fn))
            todo.extend(self.subclasses.get(id(sub), ()))
        return out

    def callees(self, src: SourceFile, scopes: _Scopes, call: ast.Call,
                scope: list[ast.FunctionDef]) -> list[int] | None:
        """Ids of the project functions ``call`` may run; None when it calls a parameter of the
        function it is in (a runner calling back what it was handed: an effect of its own)."""
        f = call.func
        if isinstance(f, ast.Name):
            return self.name_callees(src, scopes, f.id, scope)
        if not isinstance(f, ast.Attribute):
            return []
        recv, name = f.value, f.attr
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super":
            cls = _method_class(src, scope)
            if cls is None:
                return self.methods.get(name, [])
            return [id(fn) for bsrc, base in self.bases(src, cls) if (fn := self.find(bsrc, base, name))]
        if isinstance(recv, ast.Name):
            cls = _self_class(src, scope[0], recv.id)
            if cls is not None:
                return self.overrides(cls, name)
            if not scopes.is_local(recv.id, scope):
                target = self.lookup(src, recv.id)
                if target is None and recv.id not in scopes.stores.get(None, ()):
                    # an unknown global (``np``): the interpreter guesses a project method only when one
                    # class has a method of that name
                    candidates = self.methods.get(name, [])
                    return candidates if len(candidates) == 1 and not name.startswith("__") else []
                if target is not None and isinstance(target[1], ast.Module):
                    hit = self.lookup(target[0], name)
                    return self.definition_callees(hit) if hit is not None else []
                if target is not None and isinstance(target[1], ast.ClassDef):
                    fn = self.find(target[0], target[1], name)
                    return [id(fn)] if fn is not None else []
        return self.methods.get(name, [])

    def name_callees(self, src: SourceFile, scopes: _Scopes, name: str,
                     scope: list[ast.FunctionDef]) -> list[int] | None:
        if name in _params(scope[0]):
            # a classmethod's ``cls(...)`` constructs its class, as ``Cls(...)`` would
            return [] if _cls_param_class(src, scope[0], name) is not None else None
        for fn in scope:
            local = self.local_def(fn, name)
            if local is not None:
                return [id(local)]
        target = self.lookup(src, name)
        out = self.definition_callees(target) if target is not None else []
        if scopes.is_local(name, scope) or (target is None and name not in _BUILTINS):
            out = out + self.functions.get(name, []) + self.methods.get(name, [])  # a local bound to a function
        return out

    def local_def(self, fn: ast.FunctionDef, name: str) -> ast.FunctionDef | None:
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

    def definition_callees(self, target: Target) -> list[int]:
        """A function; not a class (its constructor is not linked: see the module docstring)."""
        return [id(target[1])] if isinstance(target[1], ast.FunctionDef) else []


def _method_class(src: SourceFile, scope: list[ast.FunctionDef]) -> ast.ClassDef | None:
    for fn in scope:
        owner = src.parents.get(id(fn))
        if isinstance(owner, ast.ClassDef):
            return owner
    return None


def _self_class(src: SourceFile, fn: ast.FunctionDef, name: str) -> ast.ClassDef | None:
    """The class whose instance ``name`` is: the first parameter of the method ``fn`` (a closure
    inside a method does not see it: the interpreter runs nested functions on their own frame)."""
    owner = src.parents.get(id(fn))
    if (isinstance(owner, ast.ClassDef) and not _is_static(fn) and fn.args.args and fn.args.args[0].arg == name
            and not fn.args.posonlyargs):
        return owner
    return None


def _cls_param_class(src: SourceFile, fn: ast.FunctionDef, name: str) -> ast.ClassDef | None:
    """The class a classmethod's first parameter stands for (``cls(value)`` constructs it)."""
    owner = src.parents.get(id(fn))
    if (isinstance(owner, ast.ClassDef) and fn.args.args and fn.args.args[0].arg == name
            and any(isinstance(d, ast.Name) and d.id == "classmethod" for d in fn.decorator_list)):
        return owner
    return None


def _effectful_functions(files: dict[str, SourceFile], resolver: Resolver, library: LibraryIndex | None = None,
                         own: set[str] | frozenset[str] = frozenset()) -> set[int]:
    """Ids of the functions whose execution can produce an event (see the module docstring).
    Everything else is not inlined: its effects on arrays are nil, and skipping it keeps the
    interpretation linear in the size of the code that matters."""
    direct, calls = effect_graph(files, resolver, library, own)
    callers: dict[int, list[int]] = {}
    for fid, targets in calls.items():
        for t in targets:
            callers.setdefault(t, []).append(fid)
    effectful = set(direct)
    todo = list(direct)
    while todo:
        for caller in callers.get(todo.pop(), ()):
            if caller not in effectful:
                effectful.add(caller)
                todo.append(caller)
    return effectful


def effect_graph(files: dict[str, SourceFile], resolver: Resolver, library: LibraryIndex | None,
                 own: set[str] | frozenset[str]) -> tuple[set[int], dict[int, set[int]]]:
    """(ids of the directly effectful functions, id of each function -> ids of the functions it may call)."""
    links = _Links(files, resolver)
    calls: dict[int, set[int]] = {}
    direct: set[int] = set()
    for src in files.values():
        libs = _library_names(src, library, set(own))
        scopes = _Scopes(src)
        for node, scope in scopes.nodes:
            hit = False
            called: list[int] | None = []
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
                else:
                    if isinstance(f, ast.Attribute):
                        hit = f.attr in _EFFECT_METHODS
                    called = links.callees(src, scopes, node, scope)
                    if called is None:
                        hit, called = True, []
            elif isinstance(node, ast.Attribute):
                hit = True  # ``.grad``, ``.retain_grad``, ``.requires_grad``
            else:
                hit = any(not isinstance(i.context_expr, ast.Call) for i in node.items)
            if not hit and not called:
                continue
            for fn in scope:
                if hit:
                    direct.add(id(fn))
                if called:
                    calls.setdefault(id(fn), set()).update(called)
    return direct, calls
