"""Effect summaries of installed libraries (newton, warp.fem, warp.optim, ...), derived from their source.

A call from the project into an installed package is not opaque when the package's source is on
the search path: the called function (or method, found through the class's bases) is run by the
same host interpreter that traces the project, with its parameters bound to unknown values, and
every array operation it makes is written down as an *op* whose arrays are named by *paths* from
the parameters (``state_out.particle_q``, ``self.model.particle_inv_mass``). At the project's call
site the ops are replayed against the caller's values (:meth:`HostInterpreter.apply_summary`), so
``solver.step(s_in, s_out, ...)`` reads ``s_in.particle_q`` and writes ``s_out.particle_q``.

Library modules are located on ``sys.path`` entries that are site-packages folders, read and
parsed without importing them. Summaries are cached in memory and on disk, per package name and
version (``$WARPFIX_CACHE_DIR`` or the user cache folder, ``warpfix/library/<pkg>-<version>/``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
from functools import cache

from warpfix.model.facts import KernelDef
from warpfix.model.kernels import find_kernels, fold_func_calls
from warpfix.model.library_summary import KNOWN_EFFECTS, SUMMARY_FORMAT, Summary
from warpfix.model.source import SourceFile


def _site_dirs() -> list[str]:
    return [p for p in sys.path if p and os.path.isdir(p) and os.path.basename(p) in ("site-packages", "dist-packages")]


class LibraryIndex:
    """Installed packages' modules, kernels and effect summaries (one per process: libraries do not
    change while warpfix runs)."""

    def __init__(self, site_dirs: list[str] | None = None, cache_dir: str | None = None) -> None:
        self.site_dirs = _site_dirs() if site_dirs is None else site_dirs
        self.cache_dir = cache_dir if cache_dir is not None else _default_cache_dir()
        self._files: dict[str, str | None] = {}  # dotted -> file
        self._modules: dict[str, SourceFile | None] = {}  # file -> parsed
        self._kernels: dict[str, dict[str, KernelDef]] = {}  # file -> kernel name -> facts
        self._helper_funcs: dict[str, list[KernelDef]] = {}  # file -> its @wp.func definitions
        self._summaries: dict[tuple[str, int], Summary | None] = {}
        self._packages: dict[str, str | None] = {}  # top-level name -> site dir
        # (file, line, parameters) -> what a call of that library function calls back: asked at
        # every call made outside a tape, read once (library files do not change while warpfix runs)
        self.callbacks: dict[tuple[str, int, tuple[str, ...]], list] = {}
        self._resolved: dict[tuple[str, int], tuple[str, SourceFile, ast.AST | None] | None] = {}

    # ------------------------------------------------------------------ modules
    def package_dir(self, top: str) -> str | None:
        if top not in self._packages:
            self._packages[top] = next(
                (d for d in self.site_dirs if os.path.isfile(os.path.join(d, top, "__init__.py"))
                 or os.path.isfile(os.path.join(d, top + ".py"))), None)
        return self._packages[top]

    def has_package(self, top: str) -> bool:
        """Whether calls into ``top`` are followed: an installed package built on Warp (or warp)."""
        return bool(top) and top.isidentifier() and self.package_dir(top) is not None and _uses_warp(top)

    def module_file(self, dotted: str) -> str | None:
        if dotted in self._files:
            return self._files[dotted]
        found: str | None = None
        parts = dotted.split(".")
        base = self.package_dir(parts[0]) if all(p.isidentifier() for p in parts) else None
        if base is not None:
            stem = os.path.join(base, *parts)
            for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
                if os.path.isfile(cand):
                    found = cand
                    break
        self._files[dotted] = found
        return found

    def module(self, dotted: str) -> SourceFile | None:
        path = self.module_file(dotted)
        return self.parse(path, dotted) if path is not None else None

    def parse(self, path: str, dotted: str) -> SourceFile | None:
        if path not in self._modules:
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                self._modules[path] = SourceFile.parse(path, text, dotted)
            except (OSError, SyntaxError, ValueError, RecursionError, UnicodeDecodeError):
                self._modules[path] = None
        return self._modules[path]

    def parsed(self, path: str) -> SourceFile | None:
        """A library file already loaded by :meth:`module`."""
        return self._modules.get(path)

    def kernels(self, src: SourceFile) -> dict[str, KernelDef]:
        """The file's kernels, with the effects of ``@wp.func`` helpers it imports folded in."""
        hit = self._kernels.get(src.path)
        if hit is not None:
            return hit
        own = list(find_kernels(src)) if src.warp else []
        helpers: list[KernelDef] = []
        called = {name for k in own for name, *_ in k.calls}
        if called:
            # only the modules that provide a called name (parsing every import would cascade)
            for mod, level, name, asname in src.project_imports:
                if name is None or (name != "*" and (asname or name) not in called):
                    continue
                other = self.module(self.absolute(src, mod, level))
                if other is not None and other.path != src.path and other.warp:
                    helpers.extend(self._funcs(other))
        fold_func_calls([*own, *helpers])
        out = {k.name: k for k in own}
        self._kernels[src.path] = out
        return out

    def _funcs(self, src: SourceFile) -> list[KernelDef]:
        """The file's own ``@wp.func`` definitions (unfolded), for folding into importers' kernels."""
        hit = self._helper_funcs.get(src.path)
        if hit is None:
            hit = self._helper_funcs[src.path] = [k for k in find_kernels(src) if k.kind == "func"]
        return hit

    def kernel(self, path: str, name: str) -> KernelDef | None:
        src = self._modules.get(path)
        if src is None:
            src = self.parse(path, _dotted_for(path, self.site_dirs))
        return self.kernels(src).get(name) if src is not None else None

    @staticmethod
    def absolute(src: SourceFile, mod: str, level: int) -> str:
        if not level:
            return mod
        parts = src.module_name.split(".") if src.module_name else []  # "": the package checked as "."
        is_pkg = os.path.basename(src.path) == "__init__.py"
        base = parts[: len(parts) - level + (1 if is_pkg else 0)]
        return ".".join([*base, mod] if mod else base)

    # ------------------------------------------------------------------ names
    def resolve(self, dotted: str, depth: int = 0) -> tuple[str, SourceFile, ast.AST | None] | None:
        """What ``dotted`` names: ("module", src, None), ("def", src, FunctionDef) or
        ("class", src, ClassDef), following re-exports (``from .x import Y``, star imports, imports
        under ``if TYPE_CHECKING:`` that a module ``__getattr__`` makes real). Remembered per
        (name, depth): the installed files do not change while warpfix runs."""
        key = (dotted, depth)
        if key in self._resolved:
            return self._resolved[key]
        found = self._resolved[key] = self._resolve(dotted, depth)
        return found

    def _resolve(self, dotted: str, depth: int) -> tuple[str, SourceFile, ast.AST | None] | None:
        if depth > 12:
            return None
        mod = self.module(dotted)
        if mod is not None:
            return ("module", mod, None)
        owner_name, _, name = dotted.rpartition(".")
        if not owner_name:
            return None
        owner = self.resolve(owner_name, depth + 1)
        if owner is None:
            return None
        kind, src, node = owner
        if kind == "class":
            return None
        if kind != "module":
            return None
        for stmt in _module_statements(src.tree):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                return ("def", src, stmt)
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return ("class", src, stmt)
        for stmt in _module_statements(src.tree):
            if isinstance(stmt, ast.ImportFrom):
                base = self.absolute(src, stmt.module or "", stmt.level)
                for alias in stmt.names:
                    if alias.name == "*":
                        hit = self.resolve(f"{base}.{name}", depth + 1) if base else None
                        if hit is not None:
                            return hit
                    elif (alias.asname or alias.name) == name:
                        return self.resolve(f"{base}.{alias.name}" if base else alias.name, depth + 1)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname == name:
                        return self.resolve(alias.name, depth + 1)
        return None

    # ------------------------------------------------------------------ summaries
    def summary(self, src: SourceFile, fn: ast.FunctionDef, qualname: str, is_method: bool) -> Summary | None:
        key = (src.path, fn.lineno)
        if key in self._summaries:
            return self._summaries[key]
        known = KNOWN_EFFECTS.get(f"{src.module_name}.{fn.name}")
        if known is not None and not is_method:
            self._summaries[key] = known
            return known
        self._summaries[key] = None  # a recursive request while computing sees "unknown"
        found = self._load(src.path, fn.lineno)
        if found is None:
            from warpfix.model.host import summarize

            found = summarize(self, src, fn, qualname, is_method)
            if found is not None:
                self._store(src.path, fn.lineno, found)
        self._summaries[key] = found
        return found

    def _cache_file(self, path: str, line: int) -> str | None:
        if not self.cache_dir:
            return None
        top = _dotted_for(path, self.site_dirs).split(".")[0]
        version = _package_version(top)
        h = hashlib.sha256(f"{SUMMARY_FORMAT}|{_model_fingerprint()}|{path}|{line}".encode()).hexdigest()[:32]
        return os.path.join(self.cache_dir, f"{top}-{version}", h + ".json")

    def _load(self, path: str, line: int) -> Summary | None:
        file = self._cache_file(path, line)
        if file is None:
            return None
        try:
            with open(file, encoding="utf-8") as fh:
                d = json.load(fh)
            return Summary.from_json(d)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _store(self, path: str, line: int, summary: Summary) -> None:
        file = self._cache_file(path, line)
        if file is None:
            return
        try:
            os.makedirs(os.path.dirname(file), exist_ok=True)
            tmp = f"{file}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(summary.to_json(), fh)
            os.replace(tmp, file)
        except OSError:
            pass


def _module_statements(tree: ast.Module) -> list[ast.stmt]:
    """Module-level statements, including those under ``if``/``try`` (``if TYPE_CHECKING:`` imports)."""
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, ast.If):
            todo[:0] = [*stmt.body, *stmt.orelse]
        elif isinstance(stmt, ast.Try):
            todo[:0] = [*stmt.body, *stmt.orelse, *stmt.finalbody]
        else:
            out.append(stmt)
    return out


def _dotted_for(path: str, site_dirs: list[str]) -> str:
    for d in site_dirs:
        if path.startswith(d.rstrip(os.sep) + os.sep):
            rel = os.path.relpath(path, d)[:-3].split(os.sep)
            if rel[-1] == "__init__":
                rel.pop()
            return ".".join(rel)
    return os.path.splitext(os.path.basename(path))[0]


@cache
def _package_version(top: str) -> str:
    from importlib import metadata

    try:
        dists = metadata.packages_distributions().get(top, [top])
        return metadata.version(dists[0])
    except (metadata.PackageNotFoundError, IndexError, ValueError):
        return "unknown"


@cache
def _uses_warp(top: str) -> bool:
    """``top`` is warp, or its distribution depends on warp-lang (numpy, torch... launch no kernels)."""
    if top == "warp":
        return True
    from importlib import metadata

    try:
        for dist in metadata.packages_distributions().get(top, [top]):
            if any(req.replace("_", "-").lower().startswith("warp-lang") for req in metadata.requires(dist) or ()):
                return True
    except (metadata.PackageNotFoundError, ValueError):
        return False
    return False


@cache
def _model_fingerprint() -> str:
    """Changes when the model's own code changes (a summary depends on how it was derived)."""
    root = os.path.dirname(__file__)
    h = hashlib.sha256()
    for dirpath, dirs, names in os.walk(root):  # the host interpreter that derives them is in model/host/
        dirs.sort()
        for n in sorted(names):
            if n.endswith(".py"):
                st = os.stat(os.path.join(dirpath, n))
                h.update(f"{os.path.relpath(os.path.join(dirpath, n), root)}:{st.st_mtime_ns}:{st.st_size}".encode())
    return h.hexdigest()[:16]


def _default_cache_dir() -> str:
    env = os.environ.get("WARPFIX_CACHE_DIR")
    if env is not None:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "warpfix", "library")


_SHARED: LibraryIndex | None = None


def shared_index() -> LibraryIndex:
    global _SHARED
    if _SHARED is None:
        _SHARED = LibraryIndex()
    return _SHARED
