"""WF803 replayed-side-effect: an atomic counter/allocator (`slot = wp.atomic_add(counter, 0, 1)` used
as an index) in a taped kernel without `@wp.func_replay`: the replay increments again and scatters
adjoints to wrong slots."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.kernel_flow import is_integer_annotation
from warpfix.model.reach import function_body_nodes, iter_taped
from warpfix.model.source import SourceFile
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project
    from warpfix.model.facts import KernelDef


_COUNTER_ATOMICS = ("atomic_add", "atomic_sub", "atomic_inc", "atomic_dec")


def _call_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _replayed(project: Project) -> set[str]:
    return {kd.target for kd in project.kernels if kd.kind == "func_replay" and kd.target}


def _index_uses(
    fn: ast.FunctionDef, name: str, anns: dict[str, ast.expr | None], src: SourceFile
) -> list[ast.AST]:
    """Subscripts of non-integer array parameters indexed by ``name``."""
    uses = []
    for node in function_body_nodes(fn):
        if not isinstance(node, ast.Subscript):
            continue
        base = node.value
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        if not (isinstance(base, ast.Name) and base.id in anns):
            continue
        ann = anns[base.id]
        if is_integer_annotation(src, ann):
            continue
        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.slice)):
            uses.append(node)
    return uses


def _mentions_atomic(src: SourceFile, kd: KernelDef) -> bool:
    """Whether ``kd`` may call an atomic: its text names one (``wp.atomic_add``...), or the file
    imports one under another name."""
    if any(path.rpartition(".")[2].startswith("atomic_") for path in src.warp.names.values()):
        return True
    start, end = kd.lines
    return any("atomic_" in line for line in src.text.splitlines()[start - 1:end])


class _SlotFuncs:
    """``@wp.func``s (without a replay) that return a counter atomic's result, by name:
    (index of the counter parameter, the atomic's text). ``return wp.atomic_add(counter, 0, 1)`` or
    ``slot = wp.atomic_add(counter, 0, 1)`` ... ``return slot``. Each name is looked into when it is
    first asked for (only the funcs a taped kernel calls are read)."""

    def __init__(self, project: Project, replayed: set[str]) -> None:
        self.project = project
        self.replayed = replayed
        self.found: dict[str, tuple[int, str] | None] = {}

    def get(self, name: str) -> tuple[int, str] | None:
        if name not in self.found:
            self.found[name] = _slot_funcs(self.project, self.replayed, name).get(name)
        return self.found[name]


def _slot_funcs(project: Project, replayed: set[str], name: str) -> dict[str, tuple[int, str]]:
    """:class:`_SlotFuncs` of the funcs called ``name``."""
    out: dict[str, tuple[int, str]] = {}
    for kd in project.kernels:
        if kd.name != name or kd.kind != "func" or kd.name in replayed or not kd.is_function:
            continue
        src = project.files.get(kd.path)
        if src is None or not _mentions_atomic(src, kd):
            continue  # its text calls no atomic: its body is not read
        fn = kd.node
        params = [a.arg for a in fn.args.args]
        atomics: dict[str, ast.Call] = {}
        for node in function_body_nodes(fn):
            value = node.value if isinstance(node, (ast.Assign, ast.Return)) else None
            if not (isinstance(value, ast.Call) and value.args and any(src.is_warp(value.func, a) for a in _COUNTER_ATOMICS)):
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Name) and node.value.id in atomics:
                    value = atomics[node.value.id]
                else:
                    continue
            counter = value.args[0]
            if not (isinstance(counter, ast.Name) and counter.id in params):
                continue
            if isinstance(node, ast.Assign):
                if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    atomics[node.targets[0].id] = value
                continue
            out[kd.name] = (params.index(counter.id), ast.unparse(value))
    return out


def _tid_name(src: SourceFile, fn: ast.FunctionDef) -> str | None:
    for node in function_body_nodes(fn):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and src.is_warp(node.value.func, "tid")
            and isinstance(node.targets[0], ast.Name)
        ):
            return node.targets[0].id
    return None


class ReplayedSideEffect(Rule):
    id = "WF803"
    name = "replayed-side-effect"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = (
        "reversible increment: a @wp.func that stores each thread's slot in forward and a "
        "@wp.func_replay that reads it back"
    )
    doc = RuleDoc(
        what=(
            "Flags an atomic counter/allocator (`slot = wp.atomic_add(counter, 0, 1)` whose result "
            "indexes a float array) in a kernel on a tape, outside a func that has a `@wp.func_replay`."
        ),
        why=(
            "The adjoint kernel replays the forward body before running adjoints. The replay "
            "increments the counter again and hands every thread a new slot, so adjoints are read "
            "from and scattered to the wrong slots (or past the end): gradients are zero or garbage."
        ),
        example="""
@wp.kernel
def emit(x: wp.array(dtype=float), counter: wp.array(dtype=int), out: wp.array(dtype=float)):
    tid = wp.tid()
    slot = wp.atomic_add(counter, 0, 1)
    out[slot] = x[tid] * x[tid]
""",
        use_instead="""
@wp.func
def reserve(counter: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    s = wp.atomic_add(counter, 0, 1)
    slots[tid] = s
    return s

@wp.func_replay(reserve)
def replay_reserve(counter: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    return slots[tid]

@wp.kernel
def emit(x: wp.array(dtype=float), counter: wp.array(dtype=int), slots: wp.array(dtype=int),
         out: wp.array(dtype=float)):
    tid = wp.tid()
    slot = reserve(counter, slots, tid)
    out[slot] = x[tid] * x[tid]
""",
        fix=(
            "Safe: forward values are unchanged; the kernel gets a per-thread `slots` array "
            "(allocated at each launch site) that the replay reads instead of incrementing again."
        ),
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.func
def reserve(counter: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    s = wp.atomic_add(counter, 0, 1)
    slots[tid] = s
    return s

@wp.func_replay(reserve)
def replay_reserve(counter: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    return slots[tid]

@wp.kernel
def emit(x: wp.array(dtype=float), counter: wp.array(dtype=int), slots: wp.array(dtype=int), out: wp.array(dtype=float)):
    tid = wp.tid()
    slot = reserve(counter, slots, tid)
    out[slot] = x[tid] * x[tid]
    wp.atomic_add(out, 0, x[tid])

x = wp.ones(4, dtype=float, requires_grad=True)
counter = wp.zeros(1, dtype=int)
slots = wp.zeros(4, dtype=int)
out = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(emit, dim=4, inputs=[x, counter, slots], outputs=[out])
""",
            note="the reversible increment; an accumulation whose result is unused",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.kernel
def emit(x: wp.array(dtype=float), counter: wp.array(dtype=int), out: wp.array(dtype=float)):
    tid = wp.tid()
    if x[tid] > 0.0:
        slot = wp.atomic_add(counter, 0, 1)  # expect: WF803
        out[slot] = x[tid] * x[tid]

x = wp.ones(4, dtype=float, requires_grad=True)
counter = wp.zeros(1, dtype=int)
out = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(emit, dim=4, inputs=[x, counter], outputs=[out])
""",
        ),
    ]

    @staticmethod
    def _via(node: ast.stmt, slot_funcs: _SlotFuncs, caller: str) -> tuple[str, str] | None:
        """(func name, counter argument text) for ``slot = f(counter, ...)`` with ``f`` a slot func."""
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)):
            return None
        name = _call_name(node.value.func)
        found = slot_funcs.get(name) if name is not None and name != caller else None
        if found is None:
            return None
        index = found[0]
        if index >= len(node.value.args):
            return None
        return name, ast.unparse(node.value.args[index])

    def check_project(self, project: Project) -> Iterator[Finding]:
        replayed = _replayed(project)
        slot_funcs = _SlotFuncs(project, replayed)
        for kd, src, fn, severity in iter_taped(project, self.severity):
            if kd.kind == "func" and kd.name in replayed:
                continue
            anns = {a.arg: a.annotation for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
            for node in function_body_nodes(fn):
                if not (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call)
                    and any(src.is_warp(node.value.func, a) for a in _COUNTER_ATOMICS)
                    and node.value.args
                ):
                    via = self._via(node, slot_funcs, kd.name)
                    if via is None:
                        continue
                    slot, func_name, counter = node.targets[0].id, *via
                    uses = _index_uses(fn, slot, anns, src)
                    if not uses:
                        continue
                    yield self.finding(
                        src.span(node),
                        f"`{slot} = {ast.unparse(node.value)}` in {kd.kind} `{kd.name}` allocates slots on a tape "
                        f"through @wp.func `{func_name}` ({slot_funcs.found[func_name][1]}): the backward replay "
                        f"increments `{counter}` again, so adjoints go to other slots (used at line "
                        f"{uses[0].lineno}); store the slot per thread and add a @wp.func_replay",
                        severity=severity,
                        data={
                            "kernel": kd.name,
                            "kind": kd.kind,
                            "slot": slot,
                            "counter": counter,
                            "via": func_name,
                            "tid": _tid_name(src, fn),
                        },
                        related=tuple((src.span(u), "indexed by the replayed slot") for u in uses[:3]),
                    )
                    continue
                slot = node.targets[0].id
                uses = _index_uses(fn, slot, anns, src)
                if not uses:
                    continue
                counter = ast.unparse(node.value.args[0])
                yield self.finding(
                    src.span(node),
                    f"`{slot} = {ast.unparse(node.value)}` in {kd.kind} `{kd.name}` allocates slots on a "
                    f"tape: the backward replay increments `{counter}` again, so adjoints go to other "
                    f"slots (used at line {uses[0].lineno}); store the slot per thread and add a "
                    f"@wp.func_replay",
                    severity=severity,
                    data={
                        "kernel": kd.name,
                        "kind": kd.kind,
                        "slot": slot,
                        "counter": counter,
                        "atomic": ast.unparse(node.value),
                        "tid": _tid_name(src, fn),
                    },
                    related=tuple((src.span(u), "indexed by the replayed slot") for u in uses[:3]),
                )
