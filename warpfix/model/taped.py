"""Whether a finding's code is recorded by a tape (``Finding.data["taped"]``).

A kernel-level finding is taped when its kernel, or a kernel that calls its ``@wp.func`` (directly
or through other funcs), is launched inside a tape scope somewhere in the analysed program. A
host-level finding is taped when a statement at its line runs inside a tape scope, is a tape
operation, or runs between the end of a recording and that tape's backward. Code that no tape
records gets at most a warning (RULES.md) and no automatic edit.

Whether the program records on a tape at all decides how code no visible tape reaches is
reported (the reach policy of the kernel-body rules, and the fallback for host statements the
model did not trace). So that this does not depend on which paths were given, the program of a
file inside a package is its top-most enclosing package: it records on a tape when a file of
that package creates one (``Tape(`` in its text), given or not, even where the model cannot
follow that tape's launches; ``check pkg/geometry`` and ``check pkg`` decide alike
(:func:`context_records`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import weakref
from collections.abc import Iterable

from warpfix.finding import Finding, Fix, FixSafety, Severity, not_automatic
from warpfix.model import Project
from warpfix.model.facts import KernelDef
from warpfix.model.pinned import edit_refusal
from warpfix.model.project_files import package_root
from warpfix.model.rebind_fix import RebindRefusals


class TapedIndex:
    def __init__(self, project: Project) -> None:
        self.project = project
        summary = project.trace_summary
        self.taped_kernels = self._taped_kernels(summary.taped_launches)
        self.host_lines = summary.host_lines  # (path, line) -> taped at some run
        self._marked = summary.marked
        self.any_recorded = project.recorded_elsewhere[1] or summary.any_recorded or context_records(project)

    def _taped_kernels(self, launched: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """(path, name) of kernels launched on a tape, and of the funcs they reach."""
        by_key = {(k.path, k.name): k for k in self.project.kernels}
        funcs: dict[str, list[KernelDef]] = {}
        for k in self.project.kernels:
            if k.kind == "func":
                funcs.setdefault(k.name, []).append(k)
        out = set(launched)
        todo = [by_key[key] for key in launched if key in by_key]
        while todo:
            k = todo.pop()
            for callee_name, *_ in k.calls:
                for callee in funcs.get(callee_name, ()):
                    key = (callee.path, callee.name)
                    if key not in out:
                        out.add(key)
                        todo.append(callee)
        return out

    def kernel_at(self, path: str, line: int) -> KernelDef | None:
        for k in self.project.kernels:
            if k.path == path and k.lines[0] <= line <= k.lines[1]:
                return k
        return None

    def taped(self, finding: Finding) -> bool:
        """The finding's own line is taped, or a line it relates to (the recorded read and overwrite of
        a WF103 rebinding made between windows)."""
        kernel = self.kernel_at(finding.path, finding.line)
        if kernel is not None:
            # a kernel's finding: its launches decide, not the host line of a launch it relates to (a
            # solver's launch under an undecided ``if``, replayed at a taped call, may never run)
            return self._kernel_taped(kernel)
        return self._host_taped(finding.path, finding.line) or any(
            self._taped_at(sp.path, sp.line) for sp, _ in finding.related)

    def _kernel_taped(self, kernel: KernelDef) -> bool:
        if kernel.kind in ("func_grad", "func_replay") and kernel.target:
            return any(name == kernel.target for _, name in self.taped_kernels)
        if kernel.kind == "struct":
            return self.any_recorded
        return (kernel.path, kernel.name) in self.taped_kernels

    def _taped_at(self, path: str, line: int) -> bool:
        kernel = self.kernel_at(path, line)
        return self._kernel_taped(kernel) if kernel is not None else self._host_taped(path, line)

    def _host_taped(self, path: str, line: int) -> bool:
        hit = self.host_lines.get((path, line))
        if hit is not None:
            return hit
        return self.any_recorded  # a statement the model did not trace: taped if any tape records


_TAPE_USE = re.compile(r"\bTape\s*\(")
_SKIP_DIRS = frozenset({"__pycache__", ".git", "node_modules"})
#: path -> (mtime_ns, size, uses a tape): a long-running process (the language server) rescans cheaply
_TAPE_USE_CACHE: dict[str, tuple[int, int, bool]] = {}
_CONTEXT_CACHE: list[tuple[weakref.ref, bool]] = []  # the last project asked about


def _uses_tape(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    hit = _TAPE_USE_CACHE.get(path)
    if hit is not None and hit[:2] == (st.st_mtime_ns, st.st_size):
        return hit[2]
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            found = bool(_TAPE_USE.search(fh.read()))
    except OSError:
        found = False
    _TAPE_USE_CACHE[path] = (st.st_mtime_ns, st.st_size, found)
    return found


def context_records(project: Project) -> bool:
    """Whether a file of the top-most package enclosing a checked file creates a tape, given or
    not (computed once per project). Such a program records on a tape even when the model sees
    no launch recorded: ``check pkg`` and ``check pkg/geometry`` then decide alike."""
    for ref, cached in _CONTEXT_CACHE:
        if ref() is project:
            return cached
    found = paths_context_records(project.files)
    _CONTEXT_CACHE[:] = [(weakref.ref(project), found)]
    return found


def paths_context_records(paths: Iterable[str]) -> bool:
    """:func:`context_records` for the checked files ``paths`` (``Tape(`` in the text of a file of
    their packages); part of the result cache's key."""
    for root in sorted({r for r in map(package_root, list(paths)) if r is not None}):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
            for name in filenames:
                if name.endswith(".py") and _uses_tape(os.path.join(dirpath, name)):
                    return True
    return False


UNTAPED = "no tape records this code"  # why a finding there has no automatic fix (RULES.md)


def mark_taped(project: Project, findings: Iterable[Finding]) -> list[Finding]:
    """Set ``data["taped"]`` on every finding; an error in code no tape records becomes a warning,
    and its fix is not automatic (``data["no_edit"]``: RULES.md allows edits in taped code only).

    A taped finding in code that observes its current gradients or overwrite on purpose (a test
    asserting them, Warp's own overwrite check turned on: :mod:`warpfix.model.pinned`) is a warning
    too, whose message says so, and gets ``data["no_edit"]``: no automatic edit may fix it. A
    taped finding whose codemod certainly refuses to rebind its place (:mod:`warpfix.model.rebind_fix`:
    a graph capture runs it) gets ``data["no_edit"]`` too, and keeps its severity."""
    index = TapedIndex(project)
    rebinding = RebindRefusals(project)
    out = []
    for f in findings:
        # a hazard through an undecided launch, or inside a library's chaining of its own calls
        taped = index.taped(f) and not (f.data.get("conditional") or f.data.get("library_in_place"))
        severity = f.severity if taped or f.severity != Severity.ERROR else Severity.WARNING
        data = {**f.data, "taped": taped}
        message = f.message
        observed = edit_refusal(project, f) if taped and (f.fix.safety is not FixSafety.NONE
                                                          or f.severity is Severity.ERROR) else None
        # `apply` edits taped code only, and never code that observes what the edit changes
        refusal = UNTAPED if not taped and f.fix.safety is not FixSafety.NONE else None
        if taped and observed is None and f.fix.safety is not FixSafety.NONE:
            refusal = rebinding(f)  # the codemod refuses its rebinding (a graph capture runs it)
        if observed is not None:
            refusal = f"{observed}: fix it by hand"
            if severity is Severity.ERROR:
                severity = Severity.WARNING
                message = f"{message}; a warning here, because {observed}"
        fix = f.fix
        if refusal is not None:
            data["no_edit"] = refusal
            if fix.safety is not FixSafety.NONE:  # no [*] / [-]: `apply` will not make it
                fix = Fix(FixSafety.NONE, not_automatic(fix.description, refusal))
        out.append(dataclasses.replace(f, severity=severity, data=data, message=message, fix=fix))
    return out


__all__ = ["UNTAPED", "TapedIndex", "context_records", "mark_taped", "package_root", "paths_context_records"]
