"""Which roots can create a tape: the others trace nothing a rule reads, and are not interpreted.

Every event a rule reads in a program that records on a tape is recorded on a tape or is a tape
operation, and both need a tape value, which only the interpretation of a ``wp.Tape()`` call makes
(a library summary never yields one; each root starts with no tape and fresh globals). So a root
whose run cannot reach such a call traces nothing a rule reads.

A root's run reaches what the interpreter inlines from it, and the interpreter inlines a project
function only where a value bound to it is called. This module over-approximates that set per root
by rapid type analysis, on the files' summaries (:mod:`warpfix.model.summary`; no syntax tree is
read): a *unit* is a module body, a top-level function or method with the functions nested in it,
or a class's base expressions; from the root's units, it follows

* every module-level function a name or ``module.name`` chain in a reached unit resolves to (by
  the interpreter's own module resolution), called or only handed on;
* every class such a name resolves to (or a reached unit defines locally): the class may then be
  instantiated, its ``__init__`` runs, and its base expressions are evaluated (naming its bases);
* for every attribute name used in a reached unit (``x.m()``, ``x.m`` handed on, a property),
  the method of that name of every class that may be instantiated, its bases included
  (``super().m()``), and the one project method of that name when there is only one (the
  interpreter's guess for an unknown receiver);
* where a reached unit calls into an installed Warp-based package, every public method of every
  class that may be instantiated (the library may call back any method of what it is handed).

Only functions the interpreter runs at all are followed (``effectful`` ones, and the small accessors
whose return value it evaluates: the others never run).
What matters is the *classes a root may instantiate*: linking ``x.step()`` to every ``step`` of the
project instead makes every newton test that steps a solver reach the diffsim examples' taped
``step()`` (4849 roots kept; with the classes, 133 of newton's 6528 roots run, 51 of which record)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from warpfix.model.host.linker import ProjectLinks
from warpfix.model.summary import Key


@dataclass(frozen=True)
class _Linked:
    """A unit's facts with its names resolved to what the interpreter may run."""

    seed: bool
    library: bool
    funcs: tuple[Key, ...]  # effectful module-level functions it names
    classes: tuple[Key, ...]  # classes it names or defines
    guesses: tuple[tuple[Key | None, Key], ...]  # (effectful method or None, its class): one of a name
    attrs: frozenset[str]  # the attribute names it uses that some effectful method has


class TapeRoots:
    """Answers, per root, whether its interpretation may create a tape (see the module docstring)."""

    def __init__(self, links: ProjectLinks) -> None:
        self.links = links
        # what the interpreter may run of a function: an effectful one, or what a small accessor returns
        self.followed = effectful = links.effectful | links.accessors
        # class -> method name -> the effectful defs of that name in its body
        self.methods: dict[Key, dict[str, tuple[Key, ...]]] = {}
        self.public: dict[Key, tuple[Key, ...]] = {}  # class -> its effectful public methods
        self.by_name: dict[str, list[tuple[Key, Key]]] = {}  # method name -> (class, effectful def)
        # method name -> (def if effectful, class) of the one project method of that name
        self.unique: dict[str, tuple[Key | None, Key]] = {}
        self._links: dict[Key, _Linked] = {}
        counts: dict[str, int] = {}
        for cls, info in links.classes.items():
            table: dict[str, tuple[Key, ...]] = {}
            for name, key, _prop in info.defs:
                counts[name] = counts.get(name, 0) + 1
                fid = key if key in effectful else None
                self.unique[name] = (fid, cls)
                if fid is not None:
                    table[name] = (*table.get(name, ()), fid)
                    self.by_name.setdefault(name, []).append((cls, fid))
            self.methods[cls] = table
            self.public[cls] = tuple(f for name, fids in table.items() if not name.startswith("_") for f in fids)
        for name, n in counts.items():
            if n != 1 or name.startswith("__"):
                self.unique.pop(name, None)

    def _linked(self, unit_key: Key) -> _Linked:
        """The unit's facts with its names resolved, keeping only what the interpreter may run."""
        hit = self._links.get(unit_key)
        if hit is not None:
            return hit
        links = self.links
        path = unit_key[0]
        unit = links.summaries[path].units[unit_key]
        funcs: list[Key] = []
        classes: list[Key] = list(unit.local_classes)
        found = [links.lookup(path, name) for name in unit.names]
        for chain, attr in unit.chains:
            owner = links.chain_target(path, chain)
            if owner is not None and owner[0] == "module":
                found.append(links.lookup(owner[1], attr))
        for target in found:
            if target is None:
                continue
            if target[0] == "def":
                if target[2] in self.followed:
                    funcs.append(target[2])  # type: ignore[arg-type]
            elif target[0] == "class":
                classes.append(target[2])  # type: ignore[arg-type]
        library = unit.warp_library or not links.library_names(path).isdisjoint(unit.names)
        guesses = tuple(self.unique[n] for n in unit.called if n in self.unique)
        attrs = frozenset(n for n in unit.attrs if n in self.by_name)
        hit = self._links[unit_key] = _Linked(unit.seed, library, tuple(funcs), tuple(classes), guesses, attrs)
        return hit

    # ------------------------------------------------------------------ per root
    def may_tape(self, units: Iterable[Key], classes: Iterable[Key] = ()) -> bool:
        """Whether running ``units`` (a root's own code, which runs whether or not it is effectful),
        with instances of ``classes`` at hand (a class root's ``self``), may create a tape."""
        seen: set[Key] = set()
        todo: list[Key] = []
        instantiable: set[Key] = set()
        attrs: set[str] = set()
        library = False
        methods, public = self.methods, self.public

        def instantiate(c: Key) -> None:
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
            if u not in seen:
                seen.add(u)
                todo.append(u)
        for cls in classes:
            instantiate(cls)
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
