"""Which of the files read for a check the model parses, and which installed files are the project's own.

A file that never mentions warp cannot hold a Warp gradient bug, but it can be the module an import
of the project names: ``newton/__init__.py`` only re-exports (``from ._src.sim import
ModelBuilder``). Left out, ``import newton`` in newton's own tests would not resolve to the project
and would fall to the *installed* copy's effect summaries (:mod:`warpfix.model.library`), whose
kernels carry the site-packages path: they are the project's kernels only when the project was
given by that same path. So the model also parses the other modules of every package that holds a
file mentioning warp (the top-most package folder, :func:`package_root`), and a
module of the project resolves to the project whatever form its path was given in.

Module names come from the paths as given (``cd newton && check .`` names ``newton/sim.py`` just
``sim``), so an import that names the importer's own top-most package (``import newton`` in
``newton/tests/test_x.py``) is also looked up in that package's folder (:class:`ProjectModules`).

Calls into modules outside the checked files (``check newton/_src/geometry`` calling the rest of
newton) still replay library summaries; a kernel such a summary launches from a file that is one
of the checked files is that file's kernel (:class:`ProjectKernels`), matched by real path.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from warpfix.model.facts import KernelDef
from warpfix.model.source import SourceFile

_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
_INSTALL_DIRS = frozenset({"site-packages", "dist-packages"})


def package_root(path: str) -> str | None:
    """The top-most package folder ``path`` lies in, or None outside any package: the highest
    ancestor holding an ``__init__.py``, below the project's own root (a folder with a
    ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``, or ``site-packages``). Folders
    without an ``__init__.py`` in between are namespace packages (``newton/_src``)."""
    folder = os.path.dirname(os.path.abspath(path))
    root = None
    while True:
        if os.path.basename(folder) in _INSTALL_DIRS:
            break
        if os.path.isfile(os.path.join(folder, "__init__.py")):
            root = folder
        if any(os.path.exists(os.path.join(folder, m)) for m in _PROJECT_MARKERS):
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return root


def mentions_warp(text: str) -> bool:
    """Cheap text test: a file that never mentions warp cannot hold a Warp gradient bug."""
    return "warp" in text


def model_texts(texts: dict[str, str]) -> dict[str, str]:
    """The files of ``texts`` the model parses: those that mention warp, and every other module of a
    package (top-most package folder) holding one of those."""
    roots: dict[str, str | None] = {}

    def root(path: str) -> str | None:
        if path not in roots:
            roots[path] = package_root(path)
        return roots[path]

    warp_roots = {r for p, t in texts.items() if mentions_warp(t) and (r := root(p)) is not None}
    return {p: t for p, t in texts.items()
            if mentions_warp(t) or (warp_roots and p.endswith(".py") and root(p) in warp_roots)}


class ProjectKernels:
    """The project's kernels by the real path of their file (``newton/x.py`` given relatively is the
    installed ``/.../site-packages/newton/x.py`` a library summary names)."""

    def __init__(self, kernels: Iterable[KernelDef]) -> None:
        self._by_real: dict[str, dict[str, KernelDef]] = {}
        for k in kernels:
            self._by_real.setdefault(os.path.realpath(k.path), {}).setdefault(k.name, k)
        self._real: dict[str, str] = {}  # path as asked -> real path (a library call asks per kernel it launches)

    def get(self, path: str, name: str) -> KernelDef | None:
        """The project's kernel ``name`` of the file at ``path`` (any form), or None."""
        if not self._by_real:
            return None
        real = self._real.get(path)
        if real is None:
            real = self._real[path] = os.path.realpath(path)
        return self._by_real.get(real, {}).get(name)


class ProjectModules:
    """The project's files by real path, for an import that names the importer's own top-most
    package: ``newton.sim`` from a file of the package folder ``.../newton`` is ``.../newton/sim.py``
    (or ``.../newton/sim/__init__.py``), whatever the module names derived from the given paths."""

    def __init__(self, files: Iterable[SourceFile]) -> None:
        self._files = list(files)
        self._by_real: dict[str, SourceFile] | None = None
        self._roots: dict[str, str | None] = {}
        self._found: dict[str, SourceFile | None] = {}  # the stem of a dotted name -> its file

    def find(self, importer: SourceFile, dotted: str) -> SourceFile | None:
        if importer.path not in self._roots:
            self._roots[importer.path] = package_root(importer.path)
        root = self._roots[importer.path]
        parts = dotted.split(".")
        if root is None or parts[0] != os.path.basename(root):
            return None
        if self._by_real is None:
            self._by_real = {os.path.realpath(f.path): f for f in self._files}
        stem = os.path.join(root, *parts[1:])
        hit = self._found.get(stem, False)
        if hit is False:
            hit = None
            for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
                hit = self._by_real.get(os.path.realpath(cand))
                if hit is not None:
                    break
            self._found[stem] = hit
        return hit


class ModuleResolver:
    """Which project file an import names: by its dotted name, inside the importer's own package
    (:class:`ProjectModules`), or as the one module of that name from a sibling folder."""

    def __init__(self, files: Iterable[SourceFile], modules: dict[str, SourceFile]) -> None:
        self.modules = modules  # dotted module name -> file
        self.suffixes: dict[str, list[SourceFile]] = {}  # "b.c" -> files of modules "a.b.c", "b.c"
        for src in {id(f): f for f in modules.values()}.values():
            parts = src.module_name.split(".")
            for k in range(len(parts)):
                self.suffixes.setdefault(".".join(parts[k:]), []).append(src)
        self.own = ProjectModules(files)

    def resolve(self, src: SourceFile, mod: str, level: int) -> SourceFile | None:
        from warpfix.model.library import LibraryIndex

        full = LibraryIndex.absolute(src, mod, level)  # ``from .x import`` in a package's __init__: its own x
        if full in self.modules:
            return self.modules[full]
        own = self.own.find(src, full) if not level else None  # ``import pkg.x`` inside pkg
        # the same module named from a sibling folder (scripts importing their neighbours)
        candidates = self.suffixes.get(full, ())
        return own or (candidates[0] if len(candidates) == 1 else None)
