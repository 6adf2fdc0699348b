"""Which roots can create a tape: the others trace nothing a rule reads, and are not interpreted.

Every event a rule reads in a program that records on a tape is recorded on a tape or is a tape
operation, and both need a tape value, which only the interpretation of a ``wp.Tape()`` call makes
(a library summary never yields one; each root starts with no tape and fresh globals). So a root
whose run cannot reach such a call traces nothing a rule reads.

A root's run reaches what the interpreter inlines from it, and the interpreter inlines a project
function only where a value bound to it is called. This module over-approximates that set per root
by rapid type analysis: a *unit* is a module body, or a top-level function or method with the
functions nested in it; from the root's units, it follows

* every module-level function a name or ``module.name`` chain in a reached unit resolves to (by
  the interpreter's own module resolution), called or only handed on;
* every class such a name resolves to (or a reached unit defines locally): the class, with its
  bases, may then be instantiated, and its ``__init__`` runs;
* for every attribute name used in a reached unit (``x.m()``, ``x.m`` handed on, a property),
  the method of that name of every class that may be instantiated, its bases included
  (``super().m()``), and the one project method of that name when there is only one (the
  interpreter's guess for an unknown receiver);
* where a reached unit calls into an installed Warp-based package, every public method of every
  class that may be instantiated (the library may call back any method of what it is handed).

Only functions the interpreter inlines at all are followed (``effectful``: the others never run).
What matters is the *classes a root may instantiate*: linking ``x.step()`` to every ``step`` of the
project instead makes every newton test that steps a solver reach the diffsim examples' taped
``step()`` (4849 of 6528 roots kept, against 51 that record)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

from warpfix.model.host.effects import ModuleNames, Resolver, _library_names
from warpfix.model.host.syntax import _WARP_LIBRARIES
from warpfix.model.library import LibraryIndex
from warpfix.model.source import SourceFile


@dataclass
class _Unit:
    """What one unit's code may run, before any name is resolved."""

    src: SourceFile
    seed: bool = False  # calls ``wp.Tape``
    library: bool = False  # calls into a Warp-based package (which may call back what it is handed)
    names: set[str] = field(default_factory=set)  # names read (resolved through the module)
    chains: list[ast.Attribute] = field(default_factory=list)  # ``a.b`` on a name: maybe ``module.name``
    attrs: set[str] = field(default_factory=set)  # attribute names used
    called: set[str] = field(default_factory=set)  # attribute names called (``x.m()``)
    local_classes: list[ast.ClassDef] = field(default_factory=list)  # classes defined in a function


@dataclass(frozen=True)
class _Linked:
    """A unit's facts with its names resolved to what the interpreter may run (ids of definitions)."""

    seed: bool
    library: bool
    funcs: tuple[int, ...]  # effectful module-level functions it names
    classes: tuple[int, ...]  # classes it names or defines
    guesses: tuple[tuple[int | None, int], ...]  # (effectful method or None, its class): one of a name
    attrs: frozenset[str]  # the attribute names it uses that some effectful method has


class TapeRoots:
    """Answers, per root, whether its interpretation may create a tape (see the module docstring)."""

    def __init__(self, files: dict[str, SourceFile], resolver: Resolver, library: LibraryIndex | None,
                 own: set[str], effectful: set[int]) -> None:
        self.links = ModuleNames(resolver)
        self.effectful = effectful
        self.units: dict[int, _Unit] = {}  # id(module tree, function or class) -> its facts
        # id(class) -> method name -> ids of the effectful defs of that name in its body
        self.methods: dict[int, dict[str, tuple[int, ...]]] = {}
        self.public: dict[int, tuple[int, ...]] = {}  # id(class) -> its effectful public methods
        self.by_name: dict[str, list[tuple[int, int]]] = {}  # method name -> (id(class), id(effectful def))
        # method name -> (id(def) if effectful, id(class)) of the one project method of that name
        self.unique: dict[str, tuple[int | None, int]] = {}
        self._links: dict[int, _Linked] = {}
        counts: dict[str, int] = {}
        for src in files.values():
            self._collect(src, _library_names(src, library, own))
            for cls in src.nodes_of(ast.ClassDef):
                cid = id(cls)
                table: dict[str, tuple[int, ...]] = {}
                for stmt in cls.body:
                    if isinstance(stmt, ast.FunctionDef):
                        counts[stmt.name] = counts.get(stmt.name, 0) + 1
                        fid = id(stmt) if id(stmt) in effectful else None
                        self.unique[stmt.name] = (fid, cid)
                        if fid is not None:
                            table[stmt.name] = (*table.get(stmt.name, ()), fid)
                            self.by_name.setdefault(stmt.name, []).append((cid, fid))
                self.methods[cid] = table
                self.public[cid] = tuple(f for name, fids in table.items() if not name.startswith("_") for f in fids)
        for name, n in counts.items():
            if n != 1 or name.startswith("__"):
                self.unique.pop(name, None)

    # ------------------------------------------------------------------ facts per unit
    def _collect(self, src: SourceFile, libs: set[str]) -> None:
        """The units of a file and their facts, in one pass over its nodes (breadth first: a node's
        parent comes before it). A function defined directly in the module body or in a class body
        (a method) is a unit of its own; a function defined anywhere else is part of the unit whose
        code defines it (only that code can call it), and so is a class body's code; a class defined
        anywhere but directly in the module body may be instantiated once that unit runs. A class's
        base expressions are a unit of the class: they are evaluated wherever a method is looked up
        on it."""
        tree = src.tree
        unit_of: dict[int, _Unit] = {id(tree): self._unit(tree, src)}
        parents = src.parents
        check_calls = bool(src.warp)
        for node in src.nodes:
            cls = node.__class__
            if cls is ast.Module:
                continue
            parent = parents[id(node)]
            pcls = parent.__class__
            if cls is ast.FunctionDef and (pcls is ast.ClassDef or parent is tree):
                unit = self._unit(node, src)
            elif pcls is ast.ClassDef and (node in parent.bases or node in parent.keywords):
                unit = self.units[id(parent)]
            else:
                unit = unit_of.get(id(parent))  # type: ignore[assignment]
                if unit is None:  # a shared singleton (``ast.Load()``, an operator): no children, no facts
                    continue
            unit_of[id(node)] = unit
            if cls is ast.Name:
                unit.names.add(node.id)  # type: ignore[attr-defined]
                if node.id in libs:  # type: ignore[attr-defined]
                    unit.library = True
            elif cls is ast.Attribute:
                unit.attrs.add(node.attr)  # type: ignore[attr-defined]
                if node.value.__class__ in (ast.Name, ast.Attribute):  # type: ignore[attr-defined]
                    unit.chains.append(node)  # type: ignore[arg-type]
            elif cls is ast.Call:
                func = node.func  # type: ignore[attr-defined]
                if func.__class__ is ast.Attribute:
                    unit.called.add(func.attr)
                wn = src.warp_name(func) if check_calls else None
                if wn is not None:
                    if wn.rpartition(".")[2] == "Tape":
                        unit.seed = True
                    if wn.split(".")[0] in _WARP_LIBRARIES:
                        unit.library = True
            elif cls is ast.ClassDef:
                self._unit(node, src)  # its base expressions
                if parent is not tree:
                    unit.local_classes.append(node)  # type: ignore[arg-type]

    def _unit(self, node: ast.AST, src: SourceFile) -> _Unit:
        unit = self.units[id(node)] = _Unit(src)
        return unit

    def _linked(self, unit_id: int) -> _Linked:
        """The unit's facts with its names resolved, keeping only what the interpreter may run."""
        hit = self._links.get(unit_id)
        if hit is not None:
            return hit
        unit = self.units[unit_id]
        funcs: list[int] = []
        classes: list[int] = [id(c) for c in unit.local_classes]
        found = [self.links.lookup(unit.src, name) for name in unit.names]
        for chain in unit.chains:
            owner = self.links.expr_target(unit.src, chain.value)
            if owner is not None and isinstance(owner[1], ast.Module):
                found.append(self.links.lookup(owner[0], chain.attr))
        for target in found:
            if target is None:
                continue
            if isinstance(target[1], ast.FunctionDef):
                if id(target[1]) in self.effectful:
                    funcs.append(id(target[1]))
            elif isinstance(target[1], ast.ClassDef):
                classes.append(id(target[1]))
        guesses = tuple(self.unique[n] for n in unit.called if n in self.unique)
        attrs = frozenset(n for n in unit.attrs if n in self.by_name)
        hit = self._links[unit_id] = _Linked(unit.seed, unit.library, tuple(funcs), tuple(classes), guesses, attrs)
        return hit

    # ------------------------------------------------------------------ per root
    def may_tape(self, units: Iterable[ast.AST], classes: Iterable[ast.ClassDef] = ()) -> bool:
        """Whether running ``units`` (a root's own code, which runs whether or not it is effectful),
        with instances of ``classes`` at hand (a class root's ``self``), may create a tape."""
        seen: set[int] = set()
        todo: list[int] = []
        instantiable: set[int] = set()
        attrs: set[str] = set()
        library = False
        methods, public = self.methods, self.public

        def instantiate(c: int) -> None:
            if c in instantiable or c not in methods:
                return
            instantiable.add(c)
            if c not in seen:  # its base class expressions, which name (and so instantiate) its bases
                seen.add(c)
                todo.append(c)
            for name, fids in methods[c].items():
                if name == "__init__" or name in attrs:
                    for f in fids:
                        if f not in seen:
                            seen.add(f)
                            todo.append(f)
            if library:
                for f in public[c]:
                    if f not in seen:
                        seen.add(f)
                        todo.append(f)

        for u in units:
            if id(u) in self.units and id(u) not in seen:
                seen.add(id(u))
                todo.append(id(u))
        for cls in classes:
            instantiate(id(cls))
        by_name = self.by_name
        while todo:
            unit = self._linked(todo.pop())
            if unit.seed:
                return True
            for f in unit.funcs:
                if f not in seen:
                    seen.add(f)
                    todo.append(f)
            for c in unit.classes:
                if c not in instantiable:
                    instantiate(c)
            if unit.library and not library:
                library = True
                for c in instantiable:
                    for f in public[c]:
                        if f not in seen:
                            seen.add(f)
                            todo.append(f)
            for f, c in unit.guesses:  # the interpreter's guess for a method called on an unknown value
                if f is not None and f not in seen:
                    seen.add(f)
                    todo.append(f)
                if c not in instantiable:
                    instantiate(c)
            for name in unit.attrs:
                if name not in attrs:
                    attrs.add(name)
                    for c, f in by_name[name]:
                        if c in instantiable and f not in seen:
                            seen.add(f)
                            todo.append(f)
        return False
