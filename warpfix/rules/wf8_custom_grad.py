"""WF8xx — custom gradient mechanics (checklist Tier 2): ``@wp.func_grad``, ``@wp.func_native``,
``@wp.func_replay``. WF804 (adjoint vs finite differences) is a runtime check of ``warpfix verify``.

Reach policy as in :mod:`warpfix.rules.wf4_kernel_lang`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model.source import SourceFile
from warpfix.rules.base import Example, Rule, RuleDoc
from warpfix.rules.wf4_kernel_lang import (
    function_body_nodes,
    is_array_annotation,
    is_integer_annotation,
    iter_taped,
    kernel_defs,
    tape_reach,
)

if TYPE_CHECKING:
    from warpfix.model import Project


class AdjointAssign(Rule):
    id = "WF801"
    name = "adjoint-assign"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "accumulate: `wp.adjoint[x] += ...`"
    doc = RuleDoc(
        what="Flags `wp.adjoint[x] = ...` inside a `@wp.func_grad`.",
        why=(
            "`wp.adjoint[x]` is the caller's adjoint of the argument, which may already hold "
            "contributions from other uses of the same value (`sq(x) + 3.0 * x`). Assigning "
            "discards them: the gradient is silently wrong whenever the argument is used anywhere "
            "else. Custom adjoints must accumulate."
        ),
        example="""
@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    wp.adjoint[x] = 2.0 * x * adj_ret
""",
        use_instead="""
@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    wp.adjoint[x] += 2.0 * x * adj_ret
""",
        fix="Safe: `+=` equals `=` when nothing else contributed, and is right when something did.",
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.func
def sq(x: float):
    return x * x

@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    g = 2.0 * x * adj_ret
    wp.adjoint[x] += g
"""
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.func
def sq(x: float):
    return x * x

@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    wp.adjoint[x] = 2.0 * x * adj_ret  # expect: WF801

@wp.kernel
def energy(x: wp.array(dtype=float), e: wp.array(dtype=float)):
    i = wp.tid()
    e[i] = sq(x[i]) + 3.0 * x[i]

x = wp.ones(4, dtype=float, requires_grad=True)
e = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(energy, dim=4, inputs=[x], outputs=[e])
""",
            expected_fix="""
import warp as wp

@wp.func
def sq(x: float):
    return x * x

@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    wp.adjoint[x] += 2.0 * x * adj_ret

@wp.kernel
def energy(x: wp.array(dtype=float), e: wp.array(dtype=float)):
    i = wp.tid()
    e[i] = sq(x[i]) + 3.0 * x[i]

x = wp.ones(4, dtype=float, requires_grad=True)
e = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(energy, dim=4, inputs=[x], outputs=[e])
""",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        reach = tape_reach(project)
        for kd, src, fn in kernel_defs(project, "func_grad"):
            # A custom adjoint exists only to be differentiated: report it unless the project
            # records launches on tapes and none of them reaches it.
            if reach.recorded_launches and id(kd) not in reach.taped:
                continue
            for node in function_body_nodes(fn):
                if not isinstance(node, ast.Assign):
                    continue
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and (src.warp_name(t.value) or "").endswith("adjoint"):
                        var = ast.unparse(t.slice)
                        yield self.finding(
                            src.span(node),
                            f"`wp.adjoint[{var}] = ...` in func_grad `{kd.name}` overwrites the adjoint "
                            f"of `{var}` that other uses of it already accumulated; use `+=`",
                        )


def _native_decorator(src: SourceFile, fn: ast.FunctionDef) -> ast.Call | None:
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and src.is_warp(dec.func, "func_native"):
            return dec
    return None


def _has_adjoint(dec: ast.Call) -> bool:
    given = dec.args[1] if len(dec.args) > 1 else None
    for kw in dec.keywords:
        if kw.arg == "adj_snippet":
            given = kw.value
    if given is None:
        return False
    return not (isinstance(given, ast.Constant) and (given.value is None or not str(given.value).strip()))


def _differentiable_signature(src: SourceFile, fn: ast.FunctionDef) -> bool:
    """A float-valued parameter, array or return: something a gradient could flow through."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    if fn.returns is not None and not is_integer_annotation(src, fn.returns):
        return True
    return any(
        a.annotation is not None
        and is_array_annotation(src, a.annotation)
        and not is_integer_annotation(src, a.annotation)
        for a in args
    )


class NativeNoAdjoint(Rule):
    id = "WF802"
    name = "native-no-adjoint"
    severity = Severity.ERROR
    fix_safety = FixSafety.NONE
    fix_description = "provide adj_snippet (the adjoint in C++/CUDA) or express the function in Warp"
    doc = RuleDoc(
        what=(
            "Flags a `@wp.func_native` without an `adj_snippet` that a kernel launched on a tape "
            "calls, when the snippet has float inputs or outputs."
        ),
        why=(
            "A native snippet is opaque to Warp's code generation: without `adj_snippet` its adjoint "
            "is empty, so every gradient that flows through it is silently zero."
        ),
        example="""
@wp.func_native("out[tid] = a * x[tid];")
def scale(a: float, x: wp.array(dtype=float), out: wp.array(dtype=float), tid: int): ...
""",
        use_instead="""
@wp.func_native("out[tid] = a * x[tid];", adj_snippet="adj_x[tid] += a * adj_out[tid];")
def scale(a: float, x: wp.array(dtype=float), out: wp.array(dtype=float), tid: int): ...
""",
        fix="None: the adjoint has to be written by hand.",
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.func_native("out[tid] = a * x[tid];", adj_snippet="adj_x[tid] += a * adj_out[tid];")
def scale(a: float, x: wp.array(dtype=float), out: wp.array(dtype=float), tid: int): ...

@wp.func_native("out[tid] = x[tid] + 1;")
def bump(x: wp.array(dtype=int), out: wp.array(dtype=int), tid: int): ...

@wp.kernel
def k(x: wp.array(dtype=float), y: wp.array(dtype=float), c: wp.array(dtype=int), d: wp.array(dtype=int)):
    tid = wp.tid()
    scale(2.0, x, y, tid)
    bump(c, d, tid)

x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
c = wp.zeros(4, dtype=int)
d = wp.zeros(4, dtype=int)
with wp.Tape() as tape:
    wp.launch(k, dim=4, inputs=[x, y, c, d])
""",
            note="an adjoint snippet; an integer-only snippet",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.func_native("out[tid] = a * x[tid];")
def scale(a: float, x: wp.array(dtype=float), out: wp.array(dtype=float), tid: int):  # expect: WF802
    ...

@wp.kernel
def k(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    tid = wp.tid()
    scale(2.0, x, y, tid)

x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(k, dim=4, inputs=[x, y])
""",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        callers = _call_sites(project)
        for kd, src, fn, severity in iter_taped(project, self.severity, kinds=("func_native",)):
            dec = _native_decorator(src, fn)
            if dec is None or _has_adjoint(dec) or not _differentiable_signature(src, fn):
                continue
            sites = tuple((span, f"called from `{caller}`") for span, caller in callers.get(kd.name, [])[:3])
            yield self.finding(
                _def_span(src, fn),
                f"native function `{kd.name}` has no `adj_snippet` but runs on a tape: gradients through "
                f"it are silently zero",
                severity=severity,
                data={"func": kd.name},
                related=sites,
            )


def _def_span(src: SourceFile, fn: ast.FunctionDef) -> Span:
    """The ``def`` line (not the decorator above it)."""
    full = src.span(fn)
    line = fn.lineno
    text = src.lines[line - 1] if line - 1 < len(src.lines) else ""
    col = text.find("def ") + 1 or full.column
    return Span(full.path, line, col, line, len(text) + 1)


def _call_sites(project: Project) -> dict[str, list[tuple[Span, str]]]:
    out: dict[str, list[tuple[Span, str]]] = {}
    for kd, src, fn in kernel_defs(project, "kernel", "func"):
        for node in function_body_nodes(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                out.setdefault(name, []).append((src.span(node), kd.name))
    return out


# ---------------------------------------------------------------------------------------------
# WF803
# ---------------------------------------------------------------------------------------------
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


def _slot_funcs(project: Project, replayed: set[str]) -> dict[str, tuple[int, str]]:
    """``@wp.func``s (without a replay) that return a counter atomic's result, by name:
    (index of the counter parameter, the atomic's text). ``return wp.atomic_add(counter, 0, 1)`` or
    ``slot = wp.atomic_add(counter, 0, 1)`` ... ``return slot``."""
    out: dict[str, tuple[int, str]] = {}
    for kd in project.kernels:
        fn = kd.node
        if kd.kind != "func" or kd.name in replayed or not isinstance(fn, ast.FunctionDef):
            continue
        src = project.files.get(kd.path)
        if src is None:
            continue
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
    def _via(node: ast.stmt, slot_funcs: dict[str, tuple[int, str]], caller: str) -> tuple[str, str] | None:
        """(func name, counter argument text) for ``slot = f(counter, ...)`` with ``f`` a slot func."""
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)):
            return None
        name = _call_name(node.value.func)
        if name is None or name not in slot_funcs or name == caller:
            return None
        index = slot_funcs[name][0]
        if index >= len(node.value.args):
            return None
        return name, ast.unparse(node.value.args[index])

    def check(self, project: Project) -> Iterator[Finding]:
        replayed = _replayed(project)
        slot_funcs = _slot_funcs(project, replayed)
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
                        f"through @wp.func `{func_name}` ({slot_funcs[func_name][1]}): the backward replay "
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
