"""The project model: parsed files, kernel facts and host traces, built once and shared by all rules."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from warpfix.model.facts import KernelDef, Trace
from warpfix.model.kernels import find_kernels, fold_func_calls
from warpfix.model.library import LibraryIndex, shared_index
from warpfix.model.source import SourceFile
from warpfix.model.trace_summary import TraceSummary

if TYPE_CHECKING:
    from warpfix.model.host import HostInterpreter
    from warpfix.model.summary import Key

__all__ = ["Project", "SourceFile", "build_project", "module_name_for"]


def module_name_for(path: str) -> str:
    """A dotted module name for ``path`` (relative paths keep their folders: ``pkg/sim.py`` -> ``pkg.sim``)."""
    norm = os.path.normpath(path)
    stem = norm[:-3] if norm.endswith(".py") else norm
    parts = [p for p in stem.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass
class Project:
    files: dict[str, SourceFile]
    warp_version: tuple[int, ...] = (1, 19, 0)
    kernels: list[KernelDef] = field(default_factory=list)
    library: LibraryIndex | None = None  # installed packages whose calls replay effect summaries
    # files left out of the model (an editor's unrelated neighbours) record (a kernel launch, anything)
    # on a tape: the project-wide switches of TapeReach and TapedIndex, as if they were in it
    recorded_elsewhere: tuple[bool, bool] = (False, False)
    roots_skipped: int = 0  # roots the last :meth:`iter_traces` did not run: they cannot create a tape

    @cached_property
    def _kernels_by_name(self) -> dict[str, list[KernelDef]]:
        out: dict[str, list[KernelDef]] = {}
        for k in self.kernels:
            out.setdefault(k.name, []).append(k)
        return out

    def kernel_named(self, name: str, prefer_path: str | None = None) -> KernelDef | None:
        cands = self._kernels_by_name.get(name, [])
        if prefer_path is not None:
            local = [k for k in cands if k.path == prefer_path]
            if local:
                return local[0]
        return cands[0] if len(cands) == 1 else None

    @cached_property
    def traces(self) -> list[Trace]:
        """Every host trace, kept (tests, the editor's quick fixes, one rule run alone), the roots that
        cannot create a tape included. The engine streams them instead (:meth:`iter_traces`), so that
        a check holds one root's trace at a time."""
        return list(self.iter_traces(every_root=True))

    def iter_traces(self, every_root: bool = False) -> Iterator[Trace]:
        """Host traces, each yielded as soon as its root is interpreted: each file's module body,
        then every function or method no module body reached. A consumer that keeps no trace holds
        one root's events at a time, whatever the size of the project. Unless ``every_root``, the
        roots whose run cannot create a tape are skipped (:mod:`warpfix.model.host.tape_roots`;
        :attr:`roots_skipped` counts them): nothing they trace is recorded on a tape or is a tape
        operation, and no rule reads anything else of a trace. Kernel-body rules never need an
        untaped launch either: with no launch recorded they report every kernel
        (:mod:`warpfix.model.reach`)."""
        # imported here: commands that interpret nothing (``rules``) do not load the interpreter
        from warpfix.model.host import HostInterpreter

        by_module: dict[str, SourceFile] = {}
        for src in self.files.values():
            by_module.setdefault(src.module_name, src)
            by_module.setdefault(src.module_name.rsplit(".", 1)[-1], src)
        interp = HostInterpreter(self.files, self.kernels, by_module, self.library)
        self.roots_skipped = 0
        with _young_collections():
            for trace in self._interpret(interp, every_root):
                if trace.events:
                    yield trace
                del trace  # not held while the next root is traced

    @cached_property
    def trace_summary(self) -> TraceSummary:
        """What the project-wide switches need of all traces (which launches a tape records, which
        host lines run taped). The engine sets it while it streams the traces; computed from
        :attr:`traces` otherwise."""
        summary = TraceSummary()
        for trace in self.traces:
            summary.add(trace)
        return summary

    def _interpret(self, interp: HostInterpreter, every_root: bool) -> Iterator[Trace]:
        from warpfix.model.host.tape_roots import TapeRoots

        # only files that launch, copy or tape anything can start a trace; others are reached by calls
        relevant = [src for src in self.files.values() if src.warp and _has_host_effects(src.text)]
        roots = None if every_root else TapeRoots(interp.links)

        def runs(units: list[Key], classes: tuple[Key, ...] = ()) -> bool:
            if roots is None or roots.may_tape(units, classes):
                return True
            self.roots_skipped += 1
            return False

        for src in relevant:
            if runs([src.summary.module_key()]):
                yield from _run_root(interp.run_module, src)
        for src in relevant:
            summary = src.summary
            for key, methods in summary.roots:
                if key in self._kernels_at:  # a kernel, func or struct: not host code
                    continue
                if key in summary.classes:
                    if roots is not None and methods and not roots.may_tape(methods, (key,)):
                        self.roots_skipped += len(methods)  # no method of the class may: asked once
                        continue
                    todo = [m for m in methods if len(methods) == 1 or runs([m], (key,))]
                    # the file's tree is read from here on
                    fns = [fn for m in todo if id(fn := src.definition_at(*m[1:])) not in interp.inlined]
                    if fns:
                        yield from _run_root(interp.run_class, src, src.definition_at(*key[1:]), fns)
                elif runs([key]):
                    node = src.definition_at(*key[1:])
                    if id(node) not in interp.inlined:
                        yield from _run_root(interp.run_function, src, node)

    @cached_property
    def _kernels_at(self) -> dict[Key, KernelDef]:
        """The kernels (funcs, structs...) by the place of their definition."""
        return {(k.path, *k.key): k for k in self.kernels}


YOUNG_LIMIT = 50_000  # objects allocated since the last collection after which a root's garbage is collected


@contextmanager
def _young_collections() -> Iterator[None]:
    """Interpreting roots with the automatic collector off, the model frozen and the garbage of
    finished roots collected. The interpreter's values form reference cycles (an object whose
    attribute holds it back, a comprehension's captured scope) that would otherwise stay in memory
    until the check ends (a quarter of what tracing allocates on warp). Everything alive before tracing is
    frozen (``gc.freeze``), so :func:`_collect_young` scans only what the roots made since the last
    collection, never the trees of the project (a full collection rescans millions of AST nodes)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with gc_frozen():
            try:
                yield
            finally:
                _collect_young(0)
    finally:
        if gc_was_enabled:
            gc.enable()


_freeze_depth = 0  # open gc_frozen() blocks (the check runs in one thread)


@contextmanager
def gc_frozen() -> Iterator[None]:
    """Everything alive now moved to the permanent generation (``gc.freeze``), and back when the
    outermost block ends (the engine's, between rules, holds the model's). The nesting is counted
    here: ``gc.get_freeze_count`` walks the whole permanent generation, 70 ms per check in a
    language server whose parse cache holds a folder of syntax trees."""
    global _freeze_depth
    gc.freeze()
    _freeze_depth += 1
    try:
        yield
    finally:
        _freeze_depth -= 1
        if _freeze_depth == 0:
            gc.unfreeze()


def _collect_young(limit: int | None = None) -> None:
    """Collect the youngest generation once more than ``limit`` (default :data:`YOUNG_LIMIT`)
    objects were allocated into it."""
    if gc.get_count()[0] > (YOUNG_LIMIT if limit is None else limit):
        gc.collect(0)


def _run_root(run: Callable[..., Trace | list[Trace]], *args: object) -> list[Trace]:
    """Interpret one root; code the interpreter cannot follow costs that root, never the check."""
    try:
        out = run(*args)
    except Exception:  # noqa: BLE001 - an interpreter gap must not crash a lint run
        return []
    finally:
        _collect_young()
    return out if isinstance(out, list) else [out]


def _has_host_effects(text: str) -> bool:
    return any(word in text for word in ("launch", "Tape", "copy", "assign", "zero_", "fill_", "backward"))


def build_project(files: dict[str, SourceFile], warp_version: tuple[int, ...] = (1, 19, 0),
                  library: LibraryIndex | None = None) -> Project:
    """The model of ``files``; calls into installed packages follow ``library`` (default: the
    packages on this interpreter's search path)."""
    kernels: list[KernelDef] = []
    for src in files.values():
        scanned = src.take_kernels()
        if scanned is not None:
            kernels.extend(scanned)
        elif src.warp:
            kernels.extend(find_kernels(src))
    fold_func_calls(kernels)
    return Project(files, warp_version, kernels, library if library is not None else shared_index())
