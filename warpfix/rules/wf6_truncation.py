"""WF6xx — truncated objectives: gradients of a per-window tape summed over windows while state
carries across them, and iterative solvers truncated inside the tape (checklist §8)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model import Project, SourceFile
from warpfix.model.facts import Buffer, Event, Loop, Trace
from warpfix.rules._tapeflow import (
    DIFFERENTIABLE,
    Window,
    anchor,
    iterations,
    line_ref,
    outputs,
    tape_of,
    true_reads,
)
from warpfix.rules.base import Example, Rule, RuleDoc

_SIM = """
import numpy as np
import warp as wp


@wp.kernel
def step(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), thrust: wp.array(dtype=wp.vec3),
         q_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v_new = v[i] + 0.01 * (thrust[0] + wp.vec3(0.0, -9.8, 0.0))
    v_out[i] = v_new
    q_out[i] = q[i] + 0.01 * v_new


@wp.kernel
def distance(q: wp.array(dtype=wp.vec3), goal: wp.vec3, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.length_sq(q[i] - goal))


@wp.kernel
def accumulate(acc: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    acc[i] = acc[i] + g[i]


@wp.kernel
def sgd(p: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


n, frames, substeps = 8, 4, 8
goal = wp.vec3(1.0, 2.0, 0.0)
thrust = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
grad_sum = wp.zeros(1, dtype=wp.vec3)
"""


class PerWindowTape(Rule):
    id = "WF601"
    name = "per-window-tape"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = (
        "one tape around the whole window loop and one backward after it (loss accumulated on the tape, "
        "distinct state buffers per step, fresh initial state per iteration)"
    )
    doc = RuleDoc(
        what=(
            "Flags a loop over frames/windows/chunks *inside one training iteration* that records a tape "
            "and calls `backward` in every window, sums the windows' gradients (no optimizer step between "
            "them), while simulation state written in one window is read by the next window's tape."
        ),
        why=(
            "Each window's backward treats the state it starts from as a constant. Every path by which the "
            "parameters influence later windows through the carried state is dropped, so the summed "
            "gradient is not the gradient of the episode loss — for control and locomotion objectives "
            "the dropped terms dominate. Per-window finite differences agree perfectly, which hides the bug."
        ),
        example="""
for it in range(iters):
    q, v = init_state()
    for frame in range(frames):
        tape = wp.Tape()
        with tape:
            simulate(q, v, thrust, q_next, v_next)
            wp.launch(distance, dim=n, inputs=[q_next, goal], outputs=[loss])
        tape.backward(loss)                     # backward inside the frame loop
        wp.launch(accumulate, dim=1, inputs=[grad_sum, thrust.grad])
        tape.zero()
        q, v = q_next, v_next                   # state carries to the next window
    wp.launch(sgd, dim=1, inputs=[thrust, grad_sum, lr])
""",
        use_instead="""
for it in range(iters):
    states = [init_state()] + [alloc_state() for _ in range(frames * substeps)]
    tape = wp.Tape()
    with tape:
        for frame in range(frames):
            ...  # every step writes its own state buffer; loss accumulated with atomic_add on the tape
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, lr])
    tape.zero()
""",
        fix=(
            "Safe (the hoist codemod, `codemods/wf601_hoist.py`): forward values of the first iteration are "
            "unchanged and each backward becomes the gradient of the whole episode. The rewrite puts one tape "
            "around the window loop and one backward after it; adds each window's loss into a `<loss>_total` "
            "array with a small kernel on the tape; removes the cross-window gradient buffer so the optimizer "
            "reads `p.grad`, with `tape.zero()` after its last reader; grows a carried state list to "
            "`frames * K + 1` buffers (`states[i]` becomes `states[frame * K + i]`, a helper receives the "
            "window's slice, `states[0] = states[-1]` and end-of-window copies go); repeats the allocation of "
            "per-window scratch outputs (controls, activations) at the top of every window; and gives every "
            "training iteration a fresh initial state.\n\n"
            "Shapes rewritten: (1) the frame loop inline in `main` (or any function), state carried by names "
            "rebound to fresh arrays or by an indexed state list; (2) the frame loop in a helper that receives "
            "the state list (allocated in the same file), with `states[0] = states[-1]` between windows; "
            "(3) substeps in a class method (`model.step(states[s], states[s + 1], ctrl)`) on state objects "
            "with array attributes, end-of-window copies and host-side gradient sums. Anything else (a tape "
            "created outside the window loop, a loss neither allocated nor zeroed per window, a transformed "
            "`.grad` read, `break`/`return` in the window loop, a state list allocated in another file, "
            "in-place scratch updates) is left untouched and the apply report gives the manual recipe for "
            "that code.\n\n"
            "Memory: the full-horizon tape keeps every step's state alive until the backward; the edit summary "
            "names the number of extra state buffers and the allocation each one repeats. When it does not fit, "
            "use gradient checkpointing (recompute each window's forward during backward from a saved "
            "window-start state; Warp ships no utility, its `example_fluid_checkpoint.py` shows the pattern), "
            "never a silent per-window truncation. Truncated BPTT is a legitimate choice only when made "
            "explicitly."
        ),
    )
    VALID = [
        Example(
            _SIM
            + """
for it in range(5):
    q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for frame in range(frames):
            q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
            v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
            wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
            q, v = q_next, v_next
        wp.launch(distance, dim=n, inputs=[q, goal], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
    tape.zero()
""",
            note="one tape over the whole episode",
        ),
        Example(
            _SIM
            + """
q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
for it in range(5):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
        wp.launch(distance, dim=n, inputs=[q_next, goal], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
    tape.zero()
    q, v = q_next, v_next
""",
            note="a backward in the training loop: one optimizer step per window",
        ),
        Example(
            _SIM
            + """
q0 = wp.zeros(n, dtype=wp.vec3)
for it in range(5):
    grad_sum.zero_()
    for frame in range(frames):
        q = wp.clone(q0, requires_grad=True)
        v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
            wp.launch(distance, dim=n, inputs=[q_next, goal], outputs=[loss])
        tape.backward(loss)
        wp.launch(accumulate, dim=1, inputs=[grad_sum, thrust.grad])
        tape.zero()
    wp.launch(sgd, dim=1, inputs=[thrust, grad_sum, 0.01])
""",
            note="every window starts from a fresh state: nothing carries between the tapes",
        ),
    ]
    INVALID = [
        Example(
            _SIM
            + """
for it in range(5):
    grad_sum.zero_()
    q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    for frame in range(frames):
        q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
            wp.launch(distance, dim=n, inputs=[q_next, goal], outputs=[loss])
        tape.backward(loss)  # expect: WF601
        wp.launch(accumulate, dim=1, inputs=[grad_sum, thrust.grad])
        tape.zero()
        q, v = q_next, v_next
    wp.launch(sgd, dim=1, inputs=[thrust, grad_sum, 0.01])
""",
        ),
        Example(
            {
                "main.py": """
import warp as wp

import sim

thrust = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
state = sim.State(8)
for it in range(5):
    state.reset()
    for frame in range(4):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            sim.simulate(state, thrust, loss)
        tape.backward(loss)  # expect: WF601
    wp.launch(sim.sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
    tape.zero()
""",
                "sim.py": """
import warp as wp


@wp.kernel
def step(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), thrust: wp.array(dtype=wp.vec3),
         q_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v_new = v[i] + 0.01 * (thrust[0] + wp.vec3(0.0, -9.8, 0.0))
    v_out[i] = v_new
    q_out[i] = q[i] + 0.01 * v_new


@wp.kernel
def height(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i][1] * q[i][1])


@wp.kernel
def sgd(p: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class State:
    def __init__(self, n):
        self.n = n
        self.q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        self.v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)

    def reset(self):
        self.q = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
        self.v = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)


def simulate(state, thrust, loss):
    q_next = wp.zeros(state.n, dtype=wp.vec3, requires_grad=True)
    v_next = wp.zeros(state.n, dtype=wp.vec3, requires_grad=True)
    wp.launch(step, dim=state.n, inputs=[state.q, state.v, thrust], outputs=[q_next, v_next])
    wp.launch(height, dim=state.n, inputs=[q_next], outputs=[loss])
    state.q = q_next
    state.v = v_next
""",
            },
            note="the frame loop is in main.py, the state carry happens inside sim.simulate",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for trace in project.traces:
            for loop in trace.loops.values():
                if not (loop.contains_backward and loop.contains_tape):
                    continue
                for w0, w1 in iterations(trace, loop.id):
                    finding = self._window_pair(trace, loop, w0, w1)
                    if finding is not None:
                        yield finding
                        break

    def _window_pair(self, trace: Trace, loop: Loop, w0: Window, w1: Window) -> Finding | None:
        events = trace.events
        first = events[w0.start : w0.stop]
        second = events[w1.start : w1.stop]
        bwd0 = next((e for e in first if e.kind == "backward"), None)
        bwd1 = next((e for e in second if e.kind == "backward"), None)
        if bwd0 is None or bwd1 is None or not any(e.kind == "tape_begin" for e in first):
            return None
        params = _params(first)
        later = _params(second)
        params = {k: v for k, v in params.items() if k in later}
        if not params or _steps_parameters(events[w0.start : w1.stop], params):
            return None
        carried = _carried(first, second)
        if not carried:
            return None
        reader, bufs = carried
        names = [reader.name_of(b) for b in bufs]
        src_loop = loop.span
        tape_name = str(bwd0.detail.get("tape_name") or "tape")
        return self.finding(
            bwd0.span,
            f"`{tape_name}.backward` runs once per window of the loop `{_loop_head(loop)}` "
            f"({line_ref(src_loop, bwd0.span)}) and the windows' gradients of "
            f"{', '.join(f'`{p.label}`' for p in params.values())} are summed, but "
            f"{', '.join(f'`{n}`' for n in names)} {'carries' if len(names) == 1 else 'carry'} from one window "
            f"into the next "
            f"(read on the next window's tape at {line_ref(reader.span, bwd0.span)}): each backward treats the "
            f"window's start state as a constant, so the sum is not the gradient of the episode loss",
            data={
                "loop": {
                    "path": src_loop.path,
                    "line": src_loop.line,
                    "end_line": src_loop.end_line,
                    "var": loop.var,
                },
                "tape": tape_name,
                "backward_line": bwd0.span.line,
                "carried": names,
                "params": [p.label for p in params.values()],
                "loss": bwd0.detail.get("loss"),
                # per-window gradient handling the hoist removes: reads of the parameters' .grad, tape.zero()
                "grad_reads": sorted(
                    {
                        anchor(e, bwd0).line
                        for e in first
                        if e.kind == "grad_read" and any(b.grad_of is not None and b.grad_of.root().id in params
                                                         for b in e.reads)
                    }
                ),
                "tape_zero_lines": sorted({anchor(e, bwd0).line for e in first if e.kind in ("tape_zero", "tape_reset")}),
            },
            related=((src_loop, "window loop"), (reader.span, "carried state read here")),
        )


def _loop_head(loop: Loop) -> str:
    node = loop.node
    if isinstance(node, ast.For):
        return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
    return f"while {ast.unparse(node.test)}"


def _params(window: list[Event]) -> dict[int, Buffer]:
    """Leaves of the window's recordings: read on a tape with a gradient, never written on it."""
    read: dict[int, Buffer] = {}
    written: set[int] = set()
    for ev in window:
        if ev.recorded and ev.kind in DIFFERENTIABLE:
            for b in true_reads(ev):
                root = b.root()
                if root.requires_grad and root.grad_of is None:
                    read.setdefault(root.id, root)
            written.update(b.root().id for b in outputs(ev))
    return {k: v for k, v in read.items() if k not in written}


def _steps_parameters(events: list[Event], params: dict[int, Buffer]) -> bool:
    """Whether the parameters are updated between the windows (then the loop is a training loop), or
    their gradient goes to an opaque call (an optimizer's ``step``)."""
    for ev in events:
        if ev.kind in ("alloc", "clone"):
            continue
        if any(b.root().id in params for b in outputs(ev)):
            return True
        if ev.kind == "call" and any(
            b.grad_of is not None and b.grad_of.root().id in params for b in ev.reads
        ):
            return True
    return False


def _carried(first: list[Event], second: list[Event]) -> tuple[Event, list[Buffer]] | None:
    """The first recorded op of the second window that reads state derived from the first window's
    recorded writes, with those buffers (None as soon as a launch of an unknown kernel could have
    rewritten it). The same op in the first window must read its counterpart from outside that
    window (the initial state): an input the first window produced itself is an intra-window
    intermediate whose second-window writer the model did not see."""
    tainted: set[int] = set()
    for ev in first:
        _propagate(ev, tainted, seed=ev.recorded and ev.kind in DIFFERENTIABLE)
    for ev in second:
        if ev.kind == "launch" and ev.kernel is None:
            return None  # a kernel the model cannot see may rewrite the state: no verdict
        if ev.recorded and ev.kind in DIFFERENTIABLE:
            hit = [
                b
                for b in true_reads(ev)
                if b.root().id in tainted and b.grad_of is None and _from_outside(first, ev, b)
            ]
            if hit:
                return ev, hit
        _propagate(ev, tainted, seed=False)
    return None


def _from_outside(first: list[Event], ev: Event, buf: Buffer) -> bool:
    """Whether the first window's run of ``ev``'s site read, in ``buf``'s place, an array that the first
    window had not written before it."""
    param = next((p for p, b in ev.binding.items() if b.id == buf.id), None)
    written: set[int] = set()
    for prev in first:
        if prev.span == ev.span and prev.kind == ev.kind:
            if param is not None and param in prev.binding:
                counterpart = prev.binding[param]
            else:
                position = next((i for i, b in enumerate(ev.reads) if b.id == buf.id), None)
                if position is None or position >= len(prev.reads):
                    return False
                counterpart = prev.reads[position]
            return counterpart.root().id not in written
        written.update(b.root().id for b in outputs(prev))
    return False


def _propagate(ev: Event, tainted: set[int], *, seed: bool) -> None:
    """Update the set of buffers holding data derived from the first window after ``ev``."""
    if ev.kind in ("backward", "tape_zero", "tape_reset", "grad_zero", "grad_read", "tape_begin", "tape_end"):
        return
    derived = seed or any(b.root().id in tainted for b in true_reads(ev))
    for b in ev.writes:
        if b.grad_of is not None:
            continue
        if derived:
            tainted.add(b.root().id)
        else:
            tainted.discard(b.root().id)
    for b in ev.accums:
        if derived and b.grad_of is None:
            tainted.add(b.root().id)


# ---------------------------------------------------------------------------------------- WF602

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

    def check(self, project: Project) -> Iterator[Finding]:
        ints: dict[str, dict[str, set[int | None]]] = {}
        for trace in project.traces:
            for loop in trace.loops.values():
                src = project.files.get(loop.span.path)
                if src is None:
                    continue
                if src.path not in ints:
                    ints[src.path] = _int_assignments(src)
                count = _trip_count(loop, ints[src.path])
                if count is None or not 2 <= count[0] <= MAX_TRUNCATED:
                    continue
                for w0, w1 in iterations(trace, loop.id):
                    hit = _self_feeding(trace.events, w0, w1)
                    if hit is None:
                        continue
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
