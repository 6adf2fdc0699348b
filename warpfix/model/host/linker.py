"""Project-wide name resolution on file summaries: which definition a module-level name is, which
project functions a call may run, and so which functions are *effectful* (the others are never
inlined). It reads :class:`~warpfix.model.summary.FileSummary` objects only, never a syntax tree,
so a check of a large project links every file with the trees released.

A function is *effectful* when its body (nested definitions included) allocates, launches, copies,
opens a tape, zeroes, touches ``.grad``, enters a ``with`` on a value, calls into a Warp-based
library or calls what it was handed; or when it calls an effectful function. Growing a list
(``xs.append(v)``) is not an effect, any more than ``self.x = v`` is: both only change values.

Of the other functions, the interpreter only evaluates what a small accessor returns
(``def parameters(self): return [self.torque]``), which calls nothing.

Calls are linked to definitions the way the interpreter resolves them: a name by the module's
definitions and imports (and by name, for a local the interpreter may have bound to a function);
``self.m()`` to ``m`` of the method's class, its bases and its subclasses; ``super().m()`` to the
bases; ``mod.f()`` and ``Cls.m()`` through the import; a method of an unknown global (``np.f()``)
only to the one project method the interpreter would guess; a method of any other receiver to
every project method of that name (it may be an instance of any project class). A constructor
call ``Cls()`` is not linked to ``__init__`` (it never was: linking it turns off the WF601 finding
of ``golden/WF601-attribute-loss``, which needs a look of its own)."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING

from warpfix.model.library import LibraryIndex
from warpfix.model.source import SourceFile

if TYPE_CHECKING:  # the summary module imports the host package, which imports this one
    from warpfix.model.summary import ClassInfo, FileSummary, Key, Request

_BUILTINS = frozenset(dir(builtins))

# What a module-level name is: ("def" | "class", path, key) or ("module", path, None)
Target = tuple[str, str, "Key | None"]
ResolveModule = Callable[[SourceFile, str, int], "SourceFile | None"]


def library_names(src: SourceFile, library: LibraryIndex | None, own: set[str]) -> set[str]:
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


class ProjectLinks:
    """The project's files linked by their summaries (see the module docstring)."""

    def __init__(self, files: dict[str, SourceFile], resolve_module: ResolveModule,
                 library: LibraryIndex | None, own: set[str]) -> None:
        self.files = files
        self.resolve_module = resolve_module
        self.library = library
        self.own = own
        self.summaries: dict[str, FileSummary] = {p: src.summary for p, src in files.items()}
        self.classes: dict[Key, ClassInfo] = {}
        self.methods: dict[str, list[Key]] = {}  # method name -> every class-body def of that name
        self.functions: dict[str, list[Key]] = {}  # name -> every def that is not a method
        # method name -> (path, class, def) of every class-body def (the interpreter's guess by name)
        self.method_index: dict[str, list[tuple[str, Key, Key]]] = {}
        self.property_names: set[str] = set()  # names of @property getters of project classes
        self.accessors: set[Key] = set()  # small accessors: what they return is evaluated, not inlined
        for summary in self.summaries.values():
            self.classes.update(summary.classes)
            for table, into in ((summary.methods, self.methods), (summary.functions, self.functions)):
                for name, keys in table.items():
                    into.setdefault(name, []).extend(keys)
            for info in summary.classes.values():
                for name, key, _prop in info.defs:
                    self.method_index.setdefault(name, []).append((summary.path, info.key, key))
            self.property_names |= summary.properties
            self.accessors |= summary.accessors
        self._indexes: dict[str, tuple[dict[str, tuple], list[tuple[str, int]]]] = {}
        self._libraries: dict[str, set[str]] = {}
        self._bases: dict[Key, list[Key]] = {}
        self.subclasses: dict[Key, list[Key]] = {}
        for key in self.classes:
            for base in self.bases(key):
                self.subclasses.setdefault(base, []).append(key)
        self.effectful = self._effectful()

    # ------------------------------------------------------------------ names
    def index(self, path: str) -> tuple[dict[str, tuple], list[tuple[str, int]]]:
        """Module-level definitions and imports by name, and star imports (as the interpreter's
        ``module_index``, with keys for nodes)."""
        hit = self._indexes.get(path)
        if hit is not None:
            return hit
        index = dict(self.summaries[path].index)
        stars: list[tuple[str, int]] = []
        self.files[path].import_bindings(index, stars)
        hit = self._indexes[path] = (index, stars)
        return hit

    def library_names(self, path: str) -> set[str]:
        hit = self._libraries.get(path)
        if hit is None:
            hit = self._libraries[path] = library_names(self.files[path], self.library, self.own)
        return hit

    def _module(self, path: str, mod: str, level: int) -> str | None:
        target = self.resolve_module(self.files[path], mod, level)
        return target.path if target is not None and target.path in self.summaries else None

    def lookup(self, path: str, name: str, depth: int = 0) -> Target | None:
        """What a module-level name of the file at ``path`` is (as ``HostInterpreter.defined_global``
        finds it)."""
        if depth > 8:
            return None
        index, stars = self.index(path)
        entry = index.get(name)
        if entry is None:
            for mod, level in stars:
                target = self._module(path, mod, level)
                if target is not None and not name.startswith("_"):
                    hit = self.lookup(target, name, depth + 1)
                    if hit is not None:
                        return hit
            return None
        kind = entry[0]
        if kind in ("def", "class"):
            return kind, path, entry[1]
        if kind == "module":
            target = self._module(path, entry[1], entry[2])
            return ("module", target, None) if target is not None else None
        if kind == "from":
            _, mod, level, orig = entry
            target = self._module(path, mod, level)
            if target is not None:
                return self.lookup(target, orig, depth + 1)
            sub = self._module(path, f"{mod}.{orig}" if mod else orig, level)
            return ("module", sub, None) if sub is not None else None
        return None

    def chain_target(self, path: str, chain: tuple[str, ...]) -> Target | None:
        """A name or ``module.name`` chain resolved to a definition or module."""
        target = self.lookup(path, chain[0])
        for attr in chain[1:]:
            if target is None or target[0] != "module":
                return None
            target = self.lookup(target[1], attr)
        return target

    # ------------------------------------------------------------------ classes
    def bases(self, cls: Key) -> list[Key]:
        hit = self._bases.get(cls)
        if hit is None:
            hit = []
            for chain in self.classes[cls].bases:
                target = self.chain_target(cls[0], chain)
                if target is not None and target[0] == "class" and target[2] != cls:
                    hit.append(target[2])  # type: ignore[arg-type]
            self._bases[cls] = hit
        return hit

    def find(self, cls: Key, name: str, depth: int = 0) -> Key | None:
        """``name`` defined in the class or, first found, in its bases."""
        found = self.classes[cls].methods.get(name)
        if found is not None or depth > 8:
            return found
        for base in self.bases(cls):
            hit = self.find(base, name, depth + 1)
            if hit is not None:
                return hit
        return None

    def overrides(self, cls: Key, name: str) -> list[Key]:
        """``name`` as the class, its bases and every project subclass define it (``self.name()``)."""
        out: list[Key] = []
        found = self.find(cls, name)
        if found is not None:
            out.append(found)
        todo, seen = list(self.subclasses.get(cls, ())), {cls}
        while todo:
            sub = todo.pop()
            if sub in seen:
                continue
            seen.add(sub)
            fn = self.classes[sub].methods.get(name)
            if fn is not None:
                out.append(fn)
            todo.extend(self.subclasses.get(sub, ()))
        return out

    # ------------------------------------------------------------------ calls
    def callees(self, path: str, request: Request) -> list[Key]:
        """The project functions a call may run (``request``: see :mod:`warpfix.model.summary`)."""
        kind = request[0]
        if kind == "keys":
            return list(request[1])
        if kind == "methods":
            return self.methods.get(request[1], [])
        if kind == "name":
            _, name, is_local = request
            target = self.lookup(path, name)
            out = [target[2]] if target is not None and target[0] == "def" else []
            if is_local or (target is None and name not in _BUILTINS):
                out = out + self.functions.get(name, []) + self.methods.get(name, [])  # a local bound to a function
            return out  # type: ignore[return-value]
        if kind == "super":
            _, cls, name = request
            return [fn for base in self.bases(cls) if (fn := self.find(base, name)) is not None]
        if kind == "overrides":
            return self.overrides(request[1], request[2])
        _, recv, name, stored = request  # "global"
        target = self.lookup(path, recv)
        if target is None and not stored:
            # an unknown global (``np``): the interpreter guesses a project method only when one class
            # has a method of that name
            candidates = self.methods.get(name, [])
            return candidates if len(candidates) == 1 and not name.startswith("__") else []
        if target is not None and target[0] == "module":
            hit = self.lookup(target[1], name)
            return [hit[2]] if hit is not None and hit[0] == "def" else []  # type: ignore[list-item]
        if target is not None and target[0] == "class":
            fn = self.find(target[2], name)  # type: ignore[arg-type]
            return [fn] if fn is not None else []
        return self.methods.get(name, [])

    def _effectful(self) -> set[Key]:
        """The functions whose execution can produce an event (see the module docstring)."""
        direct: set[Key] = set()
        callers: dict[Key, set[Key]] = {}
        for path, summary in self.summaries.items():
            libs = self.library_names(path)
            for (hit, request, library_root), fns in summary.effects.items():
                if library_root is not None and library_root in libs:
                    hit, called = True, []  # a call into a Warp-based library: its summary may touch arrays
                else:
                    called = self.callees(path, request) if request is not None else []
                if hit:
                    direct.update(fns)
                for target in called:
                    callers.setdefault(target, set()).update(fns)
        effectful = set(direct)
        todo = list(direct)
        while todo:
            for caller in callers.get(todo.pop(), ()):
                if caller not in effectful:
                    effectful.add(caller)
                    todo.append(caller)
        return effectful
