"""WF106 through a launch: one array passed as an input the kernel reads and as the output it overwrites
(``inputs=[w], outputs=[w]``), so the kernel reads and overwrites the same element of one array."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Span
from warpfix.model.facts import KernelDef
from warpfix.model.hazards import Hazard, hazard_data, launch_aliases, read_related
from warpfix.model.value_reads import rmw_params

if TYPE_CHECKING:
    from warpfix.model import Project
    from warpfix.rules._kernel_rmw import KernelRmwRule


def tid_targets(kernel: ast.FunctionDef) -> set[str]:
    """The index texts ``wp.tid()`` binds at the top of the kernel body (``i``, ``(i, j)``), written as an
    access's index text is (``ast.unparse``: ``h[i, j]`` indexes ``(i, j)``)."""
    out = set()
    for stmt in kernel.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and len(stmt.targets) == 1:
            func = stmt.value.func
            if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) == "tid":
                out.add(ast.unparse(stmt.targets[0]))
    return out


def full_store_refusal(kd: KernelDef, out: str) -> str | None:
    """Why a launch of ``kd`` might leave elements of ``out`` unwritten (a fresh array there would hold other
    values than the reused one), or None: every store of ``out`` is at the thread's own ``wp.tid()`` element,
    unconditional, outside loops, and ``out`` is only stored."""
    facts = kd.params.get(out)
    if facts is None or not isinstance(kd.node, ast.FunctionDef):
        return f"`{out}` is not a parameter the model knows the accesses of"
    writes = facts.accesses
    if any(a.kind != "write" for a in writes) or not writes:
        return f"`{out}` is used other than stored"
    tids = tid_targets(kd.node)
    if any(a.loops or a.via or a.index not in tids for a in writes):
        return f"`{out}` is indexed other than by the thread's own `wp.tid()` element"
    top = {stmt.lineno for stmt in kd.node.body}
    if any(a.span.line not in top for a in writes):
        return f"a store of `{out}` is conditional or nested: a fresh array would leave elements unset"
    return None


def fresh_output_refusal(kd: KernelDef, read: str, out: str) -> str | None:
    """Why a fresh output for ``out`` (the launch passing a new array there, the old one still as ``read``)
    might change a forward value, or None: it keeps them when each thread reads ``read`` only at its own
    element before any store, and stores ``out`` at that element, unconditionally, outside loops."""
    reads, writes = kd.params[read].accesses, kd.params[out].accesses
    if any(a.kind != "read" for a in reads):
        return f"`{read}` is used other than read"
    tids = tid_targets(kd.node) if isinstance(kd.node, ast.FunctionDef) else set()
    if any(a.loops or a.via or a.index not in tids for a in reads):
        return f"`{read}` is indexed other than by the thread's own `wp.tid()` element"
    stored = full_store_refusal(kd, out)
    if stored is not None:
        return stored
    # a store's span is its whole statement: a read inside it (``h[i] = wp.tanh(z[i])``) comes before the store
    first_store_end = min((a.span.end_line, a.span.end_column) for a in writes)
    if any((a.span.line, a.span.column) > first_store_end for a in reads):
        return f"`{read}` is read after `{out}` is stored"
    return None


def aliased_findings(rule: KernelRmwRule, project: Project, hazards: list[Hazard]) -> Iterator[Finding]:
    """One finding per launch argument that passes an array both as an input its kernel reads and as an
    output it overwrites, at that output argument."""
    seen: set[tuple[Span, str]] = set()
    for hz in hazards:
        ev, param = hz.write.event, hz.write.param
        kd = ev.kernel
        if kd is None or param is None or param in rmw_params(kd):
            continue
        read = launch_aliases(ev, param)
        node, src = ev.arg_nodes.get(param), project.files.get(ev.span.path)
        span = src.span(node) if node is not None and src is not None else ev.span
        if not read or (span, param) in seen:
            continue
        seen.add((span, param))
        arg = ast.unparse(node) if node is not None else hz.write.name
        refusal = fresh_output_refusal(kd, read[0], param)
        yield rule.finding(
            span,
            f"`{arg}` is passed to kernel `{kd.name}` both as `{read[0]}`, which it reads, and as `{param}`, "
            f"which it overwrites, on a tape: the kernel reads and overwrites the same element, so the adjoint "
            "replays against the overwritten values. Pass a fresh output and rebind after the launch",
            fix_safety=FixSafety.SAFE if refusal is None else FixSafety.NONE,
            fix_description=f"`{param} = wp.empty_like({arg})` passed as the output, then `{arg} = {param}`"
            + ("" if refusal is None else f"; not automatic: {refusal}"),
            data=hazard_data(hz, kernel=kd.name, param=param, alias=arg),
            related=(*read_related(hz), (ev.span, f"`{kd.name}` launched here")),
        )
