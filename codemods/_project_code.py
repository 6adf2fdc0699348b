"""The project's code as the loss walk of the WF601 hoist reads it: modules parsed with ``ast``, and the
functions, methods, classes and kernels a name or a call resolves to through the imports of the file it
is written in.

A call ``obj.method(...)`` runs the method of the class ``obj`` is an instance of: the class is read
from how ``obj`` is bound where the call is written (``obj = Cls(...)`` in the function or at module
level, ``self.obj = Cls(...)`` in the methods of the class, a parameter annotated ``obj: Cls``), ``Cls``
resolved by imports (a class of the same file, ``from mod import Cls``, ``mod.Cls``; its base classes
likewise). Only when no such binding is seen does the call fall back on the methods of that name of the
file's own classes.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from codemods._resolve import Sources, module_files
from warpfix.model.facts import KernelDef
from warpfix.model.kernels import find_kernels, fold_func_calls
from warpfix.model.source import SourceFile

MAX_IMPORT_HOPS = 8  # re-exports followed from the importing file to the class's definition


def nodes(stmts: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of ``stmts``, nested definitions (functions, classes, lambdas) left out."""
    stack: list[ast.AST] = list(reversed(stmts))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


@dataclass
class ParsedModule:
    path: str
    tree: ast.Module
    parents: dict[int, ast.AST]
    warp: set[str]  # names the module imports warp as
    kernels: dict[str, KernelDef] | None = None


@dataclass
class Frame:
    module: ParsedModule
    func: ast.FunctionDef | None  # None: module-level code
    cls: ast.ClassDef | None  # the class of a method
    forms: set[str]  # the expressions that name the loss here
    where: str  # "the window loop", "advance()"


@dataclass
class ProjectCode:
    """The project's files (path -> text), parsed on demand."""

    texts: Mapping[str, str]
    _modules: dict[str, ParsedModule | None] = field(default_factory=dict)

    # -- resolution ---------------------------------------------------------------------------
    def _callees(self, call: ast.Call, frame: Frame) -> list[Frame]:
        """The project functions/methods ``call`` may run (empty: none known)."""
        func, module = call.func, frame.module
        if isinstance(func, ast.Name):
            found = self._nested_function(module, frame.func, func.id) or self._function(module, func.id)
            return [found] if found is not None else []
        if not isinstance(func, ast.Attribute):
            return []
        receiver, name = func.value, func.attr
        if isinstance(receiver, ast.Name):
            target = self._imported_module(module, receiver.id)
            if target is not None:
                found = self._top_function(target, name)
                return [found] if found is not None else []
            if frame.cls is not None and frame.func is not None and frame.func.args.args and (
                receiver.id == frame.func.args.args[0].arg
            ):
                own = self._method(module, frame.cls, name)
                if own is not None:
                    return [own]
        classes = self._receiver_classes(receiver, frame)
        if classes is not None:
            return [m for home, cls in classes if (m := self._method(home, cls, name)) is not None]
        return [m for cls in self._classes(module) if (m := self._method(module, cls, name)) is not None]

    def _function(self, module: ParsedModule, name: str) -> Frame | None:
        found = self._top_function(module, name)
        if found is not None:
            return found
        imported = self._from_import(module, name)
        return self._top_function(*imported) if imported is not None else None

    def _nested_function(self, module: ParsedModule, func: ast.FunctionDef | None, name: str) -> Frame | None:
        """A function ``def name`` defined in the body of ``func`` or of a function around it (a closure the
        caller sees by name), innermost first."""
        while func is not None:
            for node in func.body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return Frame(module, node, None, set(), f"{name}()")
            func = self._enclosing(module, func, ast.FunctionDef)  # type: ignore[assignment]
        return None

    def _top_function(self, module: ParsedModule, name: str) -> Frame | None:
        for node in module.tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return Frame(module, node, None, set(), f"{name}()")
        return None

    def _classes(self, module: ParsedModule) -> list[ast.ClassDef]:
        return [n for n in ast.walk(module.tree) if isinstance(n, ast.ClassDef)]

    def _method(self, module: ParsedModule, cls: ast.ClassDef, name: str) -> Frame | None:
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return Frame(module, node, cls, set(), f"{cls.name}.{name}()")
        for base in cls.bases:  # a base class of the project, by imports
            parent = self._class_of(module, base)
            if parent is not None and parent[1] is not cls:
                found = self._method(*parent, name)
                if found is not None:
                    return found
        return None

    # -- the class of a receiver --------------------------------------------------------------
    def _receiver_classes(self, receiver: ast.expr, frame: Frame) -> list[tuple[ParsedModule, ast.ClassDef]] | None:
        """The project classes ``receiver`` may be an instance of, from how it is bound; None when not seen."""
        module, fn = frame.module, frame.func
        if isinstance(receiver, ast.Name):
            params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs] if fn is not None else []
            param = next((a for a in params if a.arg == receiver.id), None)
            if param is not None:
                found = self._class_of(module, param.annotation) if param.annotation is not None else None
                return [found] if found is not None else None
            for body in ([fn.body] if fn is not None else []) + [module.tree.body]:
                values = self._bound_values(module, nodes(body), lambda n: isinstance(n, ast.Name)
                                            and n.id == receiver.id)
                if values:
                    return self._constructed(module, values)
            return None
        if isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name) and frame.cls is not None and (
            fn is not None and fn.args.args and receiver.value.id == fn.args.args[0].arg
        ):
            values: list[ast.expr | None] = []
            for method in frame.cls.body:
                if isinstance(method, ast.FunctionDef) and method.args.args:
                    me = method.args.args[0].arg
                    values += self._bound_values(module, nodes(method.body), lambda n, me=me: isinstance(
                        n, ast.Attribute) and n.attr == receiver.attr and isinstance(n.value, ast.Name)
                        and n.value.id == me)
            return self._constructed(module, values) if values else None
        return None

    def _bound_values(
        self, module: ParsedModule, found: Iterator[ast.AST], target: Callable[[ast.AST], bool]
    ) -> list[ast.expr | None]:
        """The values the stores among ``found`` that ``target`` picks bind (None: a store that is no plain
        ``x = value``: a loop variable, an unpacking, an augmented assignment)."""
        values: list[ast.expr | None] = []
        for node in found:
            if isinstance(getattr(node, "ctx", None), ast.Store) and target(node):
                parent = module.parents.get(id(node))
                if isinstance(parent, ast.Assign) and parent.targets == [node]:
                    values.append(parent.value)
                elif isinstance(parent, ast.AnnAssign) and parent.target is node and parent.value is not None:
                    values.append(parent.value)
                else:
                    values.append(None)
        return values

    def _constructed(
        self, module: ParsedModule, values: list[ast.expr | None]
    ) -> list[tuple[ParsedModule, ast.ClassDef]] | None:
        """The classes ``values`` construct (``Cls(...)``), None unless every value constructs a project class."""
        out: list[tuple[ParsedModule, ast.ClassDef]] = []
        for value in values:
            found = self._class_of(module, value.func) if isinstance(value, ast.Call) else None
            if found is None:
                return None
            if all(found[1] is not c for _, c in out):
                out.append(found)
        return out

    def _class_of(self, module: ParsedModule, expr: ast.expr, depth: int = 0) -> tuple[ParsedModule, ast.ClassDef] | None:
        """The project class ``expr`` names in ``module``: defined there, or imported (``from m import Cls``,
        ``m.Cls``, a module re-exporting it)."""
        if depth > MAX_IMPORT_HOPS:
            return None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            target = self._imported_module(module, expr.value.id)
            return self._class_of(target, ast.Name(expr.attr), depth + 1) if target is not None else None
        if not isinstance(expr, ast.Name):
            return None
        for node in module.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == expr.id:
                return module, node
        imported = self._from_import(module, expr.id)
        return self._class_of(imported[0], ast.Name(imported[1]), depth + 1) if imported is not None else None

    def _from_import(self, module: ParsedModule, name: str) -> tuple[ParsedModule, str] | None:
        """The project module and the name there that ``from m import x [as name]`` binds ``name`` to (the first
        such import of the module body); None when no such import names it, or its module is not the project's."""
        for node in module.tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        target = self._module_of(module, node.module or "", node.level)
                        return (target, alias.name) if target is not None else None
        return None

    def _imported_module(self, module: ParsedModule, name: str) -> ParsedModule | None:
        """The project module ``name`` refers to (``import sim``, ``import pkg.sim as sim``, ``from pkg import sim``)."""
        for node in module.tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return self._module_of(module, alias.name, 0)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        dotted = f"{node.module}.{alias.name}" if node.module else alias.name
                        return self._module_of(module, dotted, node.level)
        return None

    def _kernel(self, expr: ast.expr, module: ParsedModule) -> KernelDef | None:
        if isinstance(expr, ast.Name):
            found = self._kernels(module).get(expr.id)
            if found is not None:
                return found
            imported = self._from_import(module, expr.id)
            return self._kernels(imported[0]).get(imported[1]) if imported is not None else None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            target = self._imported_module(module, expr.value.id)
            return self._kernels(target).get(expr.attr) if target is not None else None
        return None

    def _kernels(self, module: ParsedModule) -> dict[str, KernelDef]:
        if module.kernels is None:
            src = SourceFile.parse(module.path, self.texts[module.path])
            found = list(find_kernels(src))
            fold_func_calls(found)
            module.kernels = {k.name: k for k in found if k.kind == "kernel"}
        return module.kernels

    # -- files --------------------------------------------------------------------------------
    def _module_of(self, importer: ParsedModule, name: str, level: int) -> ParsedModule | None:
        files = module_files(importer.path, name, level, Sources(self.texts))
        return self._module(files[0]) if files else None

    def _module(self, path: str) -> ParsedModule | None:
        if path not in self._modules:
            try:
                tree = ast.parse(self.texts[path])
            except (SyntaxError, ValueError, KeyError):
                self._modules[path] = None
                return None
            parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
            warp = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                    if a.name == "warp"}
            self._modules[path] = ParsedModule(path, tree, parents, warp or {"wp"})
        return self._modules[path]

    def _enclosing(self, module: ParsedModule, node: ast.AST, kind: type) -> ast.AST | None:
        current = module.parents.get(id(node))
        while current is not None and not isinstance(current, kind):
            if isinstance(current, (ast.FunctionDef, ast.ClassDef)) and kind is ast.ClassDef:
                return None  # a function nested in a method: no `self` of a class
            current = module.parents.get(id(current))
        return current

