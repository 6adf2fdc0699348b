"""Which names in a file refer to one module-level definition of another file, through imports.

A cross-file rewrite (a kernel's new signature) must touch only the launch sites that really
launch *that* kernel: a same-named kernel of an unrelated program in a sibling folder is a
different object. A file sees the definition ``name`` of the file ``home`` when

* it is ``home`` itself (the plain name);
* it imports it: ``from M import name [as a]`` / ``from M import *`` (the plain name or ``a``),
  ``import M [as a]`` (``a.name``: a *module alias*) or ``from P import m [as a]`` with ``P.m``
  being ``home``, where ``M`` resolves to ``home`` or to a module that itself imports the name
  from ``home`` (a package re-exporting it).

A module name resolves the way Python finds it from a script: relative imports from the
file's package; absolute ones from the file's own folder first, then from each folder above
it (the project root, a ``src/`` layout's parent). Only files given in ``paths`` exist.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Binding", "DiskSources", "Sources", "binding_in", "module_files", "same_file"]


@dataclass
class Binding:
    """How one file names the definition: plain names, and (dotted) module aliases used as ``alias.name``."""

    names: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.names or self.modules)


def _key(path: str) -> str:
    return os.path.normcase(os.path.normpath(os.path.abspath(path)))


class Sources:
    """The project's files as given (path -> text), looked up by absolute path."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self.texts = texts
        self._by_key = {_key(p): p for p in texts}

    def find(self, path: str) -> str | None:
        """The given path of the file at (absolute, normalised) ``path``, None when it is not a project file."""
        return self._by_key.get(path)

    def text(self, path: str) -> str | None:
        return self.texts.get(path)


class DiskSources(Sources):
    """Files read from disk on demand (standalone ``libcst.tool`` runs, which see one file at a time)."""

    def __init__(self) -> None:
        super().__init__({})

    def find(self, path: str) -> str | None:
        return path if os.path.isfile(path) else None

    def text(self, path: str) -> str | None:
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError):
            return None


def module_files(importer: str, module: str, level: int, sources: Sources) -> list[str]:
    """The file (a ``sources`` path) the import of ``module`` in ``importer`` loads; empty when none."""
    folder = os.path.dirname(_key(importer))
    parts = [p for p in module.split(".") if p]
    if level:
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
        roots = [folder]
    else:
        roots = []
        while True:
            roots.append(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    for root in roots:
        base = os.path.join(root, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            found = sources.find(candidate)
            if found is not None:
                return [found]
    return []


def _resolves(importer: str, module: str, level: int, home: str, name: str, texts: Sources,
              seen: set[str]) -> bool:
    """Whether ``module`` (imported by ``importer``) is ``home``, or binds ``name`` from ``home``."""
    for path in module_files(importer, module, level, texts):
        if _key(path) == _key(home):
            return True
        if _key(path) not in seen and name in binding_in(path, home, name, texts, set(seen)).names:
            return True
    return False


def binding_in(path: str, home: str, name: str, texts: Sources, _seen: set[str] | None = None) -> Binding:
    """How the file ``path`` names the module-level ``name`` defined in ``home`` (empty: it does not)."""
    seen = set() if _seen is None else _seen
    seen.add(_key(path))
    out = Binding()
    if _key(path) == _key(home):
        out.names.add(name)
        return out
    text = texts.text(path)
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _resolves(path, alias.name, 0, home, name, texts, seen):
                    out.modules.add(alias.asname or alias.name)  # `import pkg.mod`: used as `pkg.mod.name`
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                if alias.name == "*" or alias.name == name:
                    if _resolves(path, module, node.level, home, name, texts, seen):
                        out.names.add(name if alias.name == "*" else alias.asname or name)
                if alias.name != "*":
                    sub = f"{module}.{alias.name}" if module else alias.name
                    if _resolves(path, sub, node.level, home, name, texts, seen):
                        out.modules.add(alias.asname or alias.name)
    return out


def same_file(filename: str | None, wanted: str) -> bool:
    """Whether the codemod context's file is the finding's file (relative or absolute)."""
    if not filename:
        return False
    a, b = os.path.normpath(filename), os.path.normpath(wanted)
    return a == b or a.endswith(os.sep + b) or b.endswith(os.sep + a)
