"""Whether a finding's code is recorded by a tape (``Finding.data["taped"]``).

A kernel-level finding is taped when its kernel, or a kernel that calls its ``@wp.func`` (directly
or through other funcs), is launched inside a tape scope somewhere in the analysed program. A
host-level finding is taped when a statement at its line runs inside a tape scope, is a tape
operation, or runs between the end of a recording and that tape's backward. Code that no tape
records gets at most a warning (RULES.md) and no automatic edit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from warpfix.finding import Finding, Severity
from warpfix.model import Project
from warpfix.model.facts import Event, KernelDef

_TAPE_OPS = {"tape_begin", "tape_end", "backward", "tape_zero", "tape_reset"}


class TapedIndex:
    def __init__(self, project: Project) -> None:
        self.project = project
        self.taped_kernels = self._taped_kernels()
        self.host_lines: dict[tuple[str, int], bool] = {}  # (path, line) -> taped at some run
        self.any_recorded = project.recorded_elsewhere[1]
        for trace in project.traces:
            self._scan(trace.events)

    def _taped_kernels(self) -> set[tuple[str, str]]:
        """(path, name) of kernels launched on a tape, and of the funcs they reach."""
        launched: set[tuple[str, str]] = set()
        for trace in self.project.traces:
            for ev in trace.events:
                if ev.kind == "launch" and ev.recorded and ev.kernel is not None:
                    launched.add((ev.kernel.path, ev.kernel.name))
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

    def _scan(self, events: list[Event]) -> None:
        pending: set[int] = set()  # tapes whose recording ended and whose backward has not run yet
        recorded_by: set[int] = set()
        for ev in events:
            taped = ev.recorded or ev.kind in _TAPE_OPS or bool(pending)
            if ev.recorded:
                self.any_recorded = True
                recorded_by.update(s.tape for s in ev.tapes)
            if ev.kind == "tape_end" and ev.tape in recorded_by:
                pending.add(ev.tape)  # type: ignore[arg-type]
            elif ev.kind in ("backward", "tape_reset") and ev.tape is not None:
                pending.discard(ev.tape)
            sites = [ev.span, *ev.call_stack]
            for span in sites:
                for line in range(span.line, min(span.end_line, span.line + 200) + 1):
                    key = (span.path, line)
                    self.host_lines[key] = self.host_lines.get(key, False) or taped

    def kernel_at(self, path: str, line: int) -> KernelDef | None:
        for k in self.project.kernels:
            node = k.node
            end = getattr(node, "end_lineno", None) or node.lineno
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if k.path == path and start <= line <= end:
                return k
        return None

    def taped(self, finding: Finding) -> bool:
        """The finding's own line is taped, or a line it relates to (the recorded read and overwrite of
        a WF103 rebinding made between windows)."""
        spans = [(finding.path, finding.line), *((sp.path, sp.line) for sp, _ in finding.related)]
        return any(self._taped_at(path, line) for path, line in spans)

    def _taped_at(self, path: str, line: int) -> bool:
        kernel = self.kernel_at(path, line)
        if kernel is not None:
            if kernel.kind in ("func_grad", "func_replay") and kernel.target:
                return any(name == kernel.target for _, name in self.taped_kernels)
            if kernel.kind == "struct":
                return self.any_recorded
            return (kernel.path, kernel.name) in self.taped_kernels
        hit = self.host_lines.get((path, line))
        if hit is not None:
            return hit
        return self.any_recorded  # a statement the model did not trace: taped if any tape records


def mark_taped(project: Project, findings: Iterable[Finding]) -> list[Finding]:
    """Set ``data["taped"]`` on every finding; an error in code no tape records becomes a warning."""
    index = TapedIndex(project)
    out = []
    for f in findings:
        taped = index.taped(f)
        severity = f.severity if taped or f.severity != Severity.ERROR else Severity.WARNING
        out.append(dataclasses.replace(f, severity=severity, data={**f.data, "taped": taped}))
    return out


__all__ = ["TapedIndex", "mark_taped"]
