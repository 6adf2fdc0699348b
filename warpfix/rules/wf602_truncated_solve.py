"""WF602 truncated-solve: an iterative solver (Jacobi/relaxation/fixed-point) with a fixed small
iteration count inside the tape: autodiff and FD agree on the truncated map, not the equilibrium."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model import Project, SourceFile
from warpfix.model.facts import Event, Loop, Trace
from warpfix.model.tapeflow import Window, iterations, line_ref, outputs, tape_of
from warpfix.rules.base import Example, Rule, RuleDoc

_SOLVER_WORDS = (
    "iter",
    "jacobi",
    "relax",
    "solve",
    "gauss",
    "seidel",
    "sor",
    "fixed",
    "pressure",
    "sweep",
    "smooth",
)
MAX_TRUNCATED = 256


def _int_assignments(src: SourceFile) -> dict[str, set[int | None]]:
    """Every name/attribute target in the file -> the values assigned to it (None: not an int literal)."""
    out: dict[str, set[int | None]] = {}
    for stmt in src.nodes_of(ast.Assign, ast.AnnAssign):
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        literal = value.value if isinstance(value, ast.Constant) and type(value.value) is int else None
        for t in targets:
            if isinstance(t, (ast.Name, ast.Attribute)):
                out.setdefault(ast.unparse(t), set()).add(literal)
    return out


def _over_range(loop: Loop) -> bool:
    """``for _ in range(N)``, one argument: the loops :func:`_trip_count` may count."""
    node = loop.node
    return (isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name)
            and node.iter.func.id == "range" and len(node.iter.args) == 1)


def _trip_count(loop: Loop, ints: dict[str, set[int | None]]) -> tuple[int, str] | None:
    """The constant trip count of ``for _ in range(N)`` and the text of N, when N is a literal or a
    name/attribute assigned one integer literal in the file."""
    node = loop.node
    if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
        return None
    call = node.iter
    if not (isinstance(call.func, ast.Name) and call.func.id == "range") or len(call.args) != 1:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and type(arg.value) is int:
        return arg.value, str(arg.value)
    if not isinstance(arg, (ast.Name, ast.Attribute)):
        return None
    text = ast.unparse(arg)
    values = ints.get(text, set())
    if len(values) == 1 and None not in values:
        return next(iter(values)), text  # type: ignore[return-value]
    return None


def _solver_hint(*names: str | None) -> bool:
    return any(word in (name or "").lower() for name in names for word in _SOLVER_WORDS)


class TruncatedSolve(Rule):
    id = "WF602"
    name = "truncated-solve"
    severity = Severity.WARNING
    fix_safety = FixSafety.NONE
    fix_description = (
        "none: converge the solve outside the tape, then record a few warm-started iterations from the "
        "fixed point"
    )
    doc = RuleDoc(
        what=(
            "Flags an iterative solver — Jacobi, relaxation, Gauss-Seidel, fixed-point: a loop with a small "
            "constant trip count whose kernel reads its own previous iterate at neighbouring entries and "
            "writes the next — recorded on a tape that is differentiated."
        ),
        why=(
            "Backward differentiates the truncated map (N sweeps from the initial guess), not the "
            "equilibrium. Finite differences agree with autodiff because both see the same truncated "
            "program, so every check passes while the optimum found does not reproduce when re-simulated "
            "with a converged solve."
        ),
        example="""
with tape:
    for _ in range(jacobi_iters):          # 8 sweeps, far from converged
        p_new = wp.empty_like(p)
        wp.launch(jacobi, dim=n, inputs=[p, div], outputs=[p_new])
        p = p_new
    wp.launch(pressure_loss, dim=n, inputs=[p], outputs=[loss])
tape.backward(loss)
""",
        use_instead="""
for _ in range(500):                       # converge outside the tape (not recorded)
    wp.launch(jacobi, dim=n, inputs=[p, div], outputs=[p_tmp])
    p, p_tmp = p_tmp, p
with tape:
    for _ in range(4):                     # a few recorded sweeps warm-started at the fixed point
        p_new = wp.empty_like(p)
        wp.launch(jacobi, dim=n, inputs=[p, div], outputs=[p_new])
        p = p_new
    wp.launch(pressure_loss, dim=n, inputs=[p], outputs=[loss])
tape.backward(loss)
""",
        fix="None: how far to converge and where to warm-start is a modelling decision.",
    )
    _SOLVE = """
import warp as wp


@wp.kernel
def jacobi(p: wp.array(dtype=float), rhs: wp.array(dtype=float), p_out: wp.array(dtype=float)):
    i = wp.tid()
    n = p.shape[0]
    left = p[wp.max(i - 1, 0)]
    right = p[wp.min(i + 1, n - 1)]
    p_out[i] = 0.5 * (left + right - rhs[i])


@wp.kernel
def sum_sq(p: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, p[i] * p[i])


n = 64
jacobi_iters = 8
rhs = wp.ones(n, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
p = wp.zeros(n, dtype=float, requires_grad=True)
"""
    VALID = [
        Example(
            _SOLVE
            + """
for _ in range(jacobi_iters):
    p_new = wp.zeros(n, dtype=float, requires_grad=True)
    wp.launch(jacobi, dim=n, inputs=[p, rhs], outputs=[p_new])
    p = p_new
tape = wp.Tape()
with tape:
    p_new = wp.zeros(n, dtype=float, requires_grad=True)
    wp.launch(jacobi, dim=n, inputs=[p, rhs], outputs=[p_new])
    wp.launch(sum_sq, dim=n, inputs=[p_new], outputs=[loss])
tape.backward(loss)
""",
            note="the sweeps run outside the tape; one recorded sweep from the warm start",
        ),
    ]
    INVALID = [
        Example(
            _SOLVE
            + """
tape = wp.Tape()
with tape:
    for _ in range(jacobi_iters):  # expect: WF602
        p_new = wp.zeros(n, dtype=float, requires_grad=True)
        wp.launch(jacobi, dim=n, inputs=[p, rhs], outputs=[p_new])
        p = p_new
    wp.launch(sum_sq, dim=n, inputs=[p], outputs=[loss])
tape.backward(loss)
""",
        ),
    ]

    def begin(self, project: Project) -> None:
        self._ints: dict[str, dict[str, set[int | None]]] = {}  # path -> its integer assignments

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        for loop in trace.loops.values():
            src = project.files.get(loop.span.path)
            if src is None:
                continue
            if not _over_range(loop):
                continue
            for w0, w1 in iterations(trace, loop.id):
                hit = _self_feeding(trace.events, w0, w1)
                if hit is None:
                    continue
                # the file's integer assignments, read only for a loop that feeds a launch its own output
                if src.path not in self._ints:
                    self._ints[src.path] = _int_assignments(src)
                count = _trip_count(loop, self._ints[src.path])
                if count is None or not 2 <= count[0] <= MAX_TRUNCATED:
                    break
                launch, solution = hit
                kernel = launch.kernel.name if launch.kernel else "?"
                if not _solver_hint(kernel, count[1], loop.var):
                    continue
                yield self.finding(
                    loop.span,
                    f"iterative solve on the tape: {count[0]} sweeps of `{kernel}` "
                    f"({line_ref(launch.span, loop.span)}) update `{solution}` from its previous iterate "
                    f"and are differentiated by backward: the gradient is that of the {count[0]}-sweep "
                    f"truncated map, not of the converged solution",
                    data={"kernel": kernel, "iterations": count[0], "solution": solution},
                    related=((launch.span, "solver sweep recorded here"),),
                )
                break


def _warm_started(before: list[Event], launch: Event, param: str) -> bool:
    """Whether the first recorded sweep starts from an iterate that untaped sweeps of the same kernel
    produced (converged outside the tape, a few recorded iterations at the fixed point)."""
    start = launch.binding[param].root().id
    for ev in reversed(before):
        if any(b.root().id == start for b in outputs(ev)):
            return ev.kind == "launch" and not ev.recorded and ev.kernel is launch.kernel
    return False


def _self_feeding(events: list[Event], w0: Window, w1: Window) -> tuple[Event, str] | None:
    """A recorded launch site of the loop body that, in the second iteration, reads what it wrote in
    the first at a different index (a stencil or coupling), for exactly one solution array, on a tape
    that is later differentiated."""
    # a library call's launches share the call's span: the kernel tells them apart
    first = {(e.span, e.kernel.name): e for e in events[w0.start : w0.stop]
             if e.kind == "launch" and e.recorded and e.kernel}
    for ev in events[w1.start : w1.stop]:
        prev = first.get((ev.span, ev.kernel.name)) if ev.kernel is not None else None
        if ev.kind != "launch" or not ev.recorded or prev is None or ev.kernel is None:
            continue
        written = {b.root().id: p for p, b in prev.binding.items() if prev.kernel.params[p].written}
        fed = {
            (p, written[b.root().id])
            for p, b in ev.binding.items()
            if b.root().id in written and ev.kernel.params[p].has("read", "rmw")
        }
        if len({out for _, out in fed}) != 1:
            continue
        (read_param, out_param), *_ = sorted(fed)
        facts = ev.kernel.params
        write_idx = {a.index for a in facts[out_param].accesses if a.kind in ("write", "rmw")}
        if not any(a.kind == "read" and a.index not in write_idx for a in facts[read_param].accesses):
            continue
        tape = tape_of(ev)
        if not any(e.kind == "backward" and e.tape == tape for e in events[w1.stop :]):
            continue
        if _warm_started(events[: w0.start], prev, read_param):
            continue
        return ev, ev.name_of(ev.binding[read_param])
    return None
