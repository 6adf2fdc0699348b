"""Which kernels and funcs run under a tape: the reach policy the kernel-body rules (WF4xx, WF7xx,
WF8xx) share.

Reach policy (all kernel-body rules). A definition is *taped* when a launch recorded on a tape
reaches it (the kernel itself, every ``@wp.func`` it calls, transitively, and the
``@wp.func_grad``/``@wp.func_replay`` of those funcs). When the project records launches on a
tape, only taped code is reported. When it has no tape at all (a library, or a module whose
training script is elsewhere), kernel code may still be differentiated by someone else:
error-severity rules then report at warning severity, and warning/info rules stay silent. The
project records on a tape also when a file of the top-most package enclosing a checked file
creates one (:func:`warpfix.model.taped.context_records`): ``check pkg/geometry`` then reports
what ``check pkg`` reports there, instead of warning about kernels no tape records.
Kernels compiled with ``enable_backward=False`` are never reported.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from warpfix.finding import Severity
from warpfix.model.facts import KernelDef
from warpfix.model.memo import IdentityMemo
from warpfix.model.source import SourceFile
from warpfix.model.taped import context_records

if TYPE_CHECKING:
    from warpfix.model import Project


# ---------------------------------------------------------------------------------------------
# Which code runs under a tape
# ---------------------------------------------------------------------------------------------
def _callee_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _body_nodes(fn: ast.FunctionDef) -> tuple[ast.AST, ...]:
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(reversed(fn.body))
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return tuple(out)


#: Every node of a function's body in pre-order, not descending into nested definitions. Computed once
#: per function: a dozen kernel-body rules and analyses walk every kernel and func body.
function_body_nodes: IdentityMemo[ast.FunctionDef, tuple[ast.AST, ...]] = IdentityMemo(_body_nodes, 50_000)


@dataclass
class TapeReach:
    """Which kernel definitions run under a tape (see the module docstring)."""

    recorded_launches: bool  # the model saw at least one launch recorded on a tape
    taped: set[int] = field(default_factory=set)  # id() of reached KernelDefs
    no_backward: set[str] = field(default_factory=set)  # files that switch backward code off

    def backward_disabled(self, kd: KernelDef) -> bool:
        """No adjoint is compiled for ``kd`` (kernel option, module options, a file-wide switch)."""
        return _options_disable_backward(kd) or kd.path in self.no_backward

    def severity(self, kd: KernelDef, rule_severity: Severity) -> Severity | None:
        """The severity to report a finding in ``kd`` with, or None to stay silent."""
        if self.backward_disabled(kd):
            return None
        if id(kd) in self.taped:
            return rule_severity
        if self.recorded_launches:
            return None
        return Severity.WARNING if rule_severity is Severity.ERROR else None


_REACH_CACHE: list[tuple[weakref.ref, TapeReach]] = []  # the last project checked (rules share it)
_NO_BACKWARD_CACHE: list[tuple[weakref.ref, set[str]]] = []  # its files that switch backward code off


def tape_reach(project: Project) -> TapeReach:
    """Compute (once per project object) which definitions run under a tape."""
    for ref, cached in _REACH_CACHE:
        if ref() is project:
            return cached
    funcs: dict[str, list[KernelDef]] = {}
    customs: dict[str, list[KernelDef]] = {}
    for kd in project.kernels:
        if kd.kind in ("func", "func_native"):
            funcs.setdefault(kd.name, []).append(kd)
        elif kd.kind in ("func_grad", "func_replay") and kd.target:
            customs.setdefault(kd.target, []).append(kd)
    roots = list(project.trace_summary.recorded_kernels.values())
    reach = TapeReach(recorded_launches=bool(roots) or project.recorded_elsewhere[0] or context_records(project),
                      no_backward=_backward_disabled_files(project))
    stack = list(roots)
    while stack:
        kd = stack.pop()
        if id(kd) in reach.taped:
            continue
        reach.taped.add(id(kd))
        stack.extend(customs.get(kd.name, []) if kd.kind == "func" else [])
        if not isinstance(kd.node, ast.FunctionDef):
            continue
        for node in function_body_nodes(kd.node):
            if isinstance(node, ast.Call):
                name = _callee_name(node)
                if name is None:
                    continue
                cands = funcs.get(name, [])
                local = [c for c in cands if c.path == kd.path]
                stack.extend(local or cands)
    _REACH_CACHE[:] = [(weakref.ref(project), reach)]
    return reach


def _options_disable_backward(kd: KernelDef) -> bool:
    module_opts = kd.options.get("module_options")
    return kd.options.get("enable_backward") is False or (
        isinstance(module_opts, dict) and module_opts.get("enable_backward") is False
    )


def compiles_no_adjoint(project: Project, kd: KernelDef) -> bool:
    """:meth:`TapeReach.backward_disabled` without the traces: usable while they are streamed (a rule's
    ``check_trace``), when the tape reach is not known yet."""
    return _options_disable_backward(kd) or kd.path in _backward_disabled_files(project)


def _backward_disabled_files(project: Project) -> set[str]:
    """The files of :func:`_scan_backward_disabled_files`, scanned once per project object."""
    for ref, files in _NO_BACKWARD_CACHE:
        if ref() is project:
            return files
    files = _scan_backward_disabled_files(project)
    _NO_BACKWARD_CACHE[:] = [(weakref.ref(project), files)]
    return files


def _scan_backward_disabled_files(project: Project) -> set[str]:
    """Files whose module body runs ``wp.set_module_options({"enable_backward": False})`` or
    sets ``wp.config.enable_backward = False``: no adjoint code is compiled for their kernels (read
    from the files' summaries, :class:`warpfix.model.summary.FileSummary`)."""
    return {path for path, src in project.files.items() if src.summary.backward_off}


def kernel_defs(project: Project, *kinds: str) -> Iterator[tuple[KernelDef, SourceFile, ast.FunctionDef]]:
    """(definition, its source file, its function node) for every definition of ``kinds``."""
    for kd in project.kernels:
        src = project.files.get(kd.path)
        if kd.kind in kinds and src is not None and kd.is_function:
            yield kd, src, kd.node  # type: ignore[misc]


def iter_taped(
    project: Project, rule_severity: Severity, kinds: Iterable[str] = ("kernel", "func")
) -> Iterator[tuple[KernelDef, SourceFile, ast.FunctionDef, Severity]]:
    """The definitions a kernel-body rule should look at, with the severity to report at."""
    reach = tape_reach(project)
    for kd in project.kernels:
        src = project.files.get(kd.path)
        if kd.kind not in kinds or src is None or not kd.is_function:
            continue
        severity = reach.severity(kd, rule_severity)  # before the node: only these are looked into
        if severity is not None:
            yield kd, src, kd.node, severity  # type: ignore[misc]
