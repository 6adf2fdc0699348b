"""WF3xx — tape lifecycle and scope: gradients summed over optimizer iterations, work recorded
after the loss, recorded arrays mutated before backward, and gradients read at the wrong time
(checklist §3, §3b)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model import Project
from warpfix.model.facts import Buffer, Event, Trace, exclusive
from warpfix.rules._tapeflow import (
    DIFFERENTIABLE,
    WRITES,
    anchor,
    contains,
    line_ref,
    outputs,
    runs_with,
    tape_of,
    true_reads,
)
from warpfix.rules.base import Example, Rule, RuleDoc

_KERNELS = """
import numpy as np
import warp as wp


@wp.kernel
def predict(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = w[0] * x[i] + w[1]


@wp.kernel
def mse(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d / 32.0)


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    w[i] = w[i] - lr * g[i]


xs = np.linspace(0.0, 1.0, 32)
x = wp.array(xs, dtype=float)
target = wp.array(3.0 * xs + 1.0, dtype=float)
w = wp.zeros(2, dtype=float, requires_grad=True)
y = wp.zeros(32, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""


def _leaves(events: list[Event], tape: int | None, start: int, stop: int) -> dict[int, Buffer]:
    """Parameters of the recording of ``tape`` in ``events[start:stop]``: arrays with a gradient that
    its ops read and never overwrite."""
    read: dict[int, Buffer] = {}
    written: set[int] = set()
    for ev in events[start:stop]:
        if tape_of(ev) != tape or ev.kind not in DIFFERENTIABLE:
            continue
        for buf in true_reads(ev):
            root = buf.root()
            if root.requires_grad and root.grad_of is None:
                read.setdefault(root.id, root)
        written.update(b.root().id for b in ev.writes)
    return {k: v for k, v in read.items() if k not in written}


def _is_reference(parents: dict[int, ast.AST], node: ast.AST) -> bool:
    """Whether a ``x.grad`` expression only takes a reference (``g = x.grad``, ``[p.grad for p in ps]``,
    ``x.grad.flatten()``) rather than reading the values."""
    cur: ast.AST = node
    while True:
        parent = parents.get(id(cur))
        if parent is None or isinstance(parent, ast.stmt):
            return isinstance(parent, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and not isinstance(
                parent, ast.AugAssign
            )
        if isinstance(parent, ast.Call):
            func = parent.func
            if isinstance(func, ast.Attribute) and func.value is cur:
                if func.attr not in ("flatten", "reshape", "view", "transpose"):
                    return False
            else:
                return False
        elif not isinstance(parent, (ast.List, ast.Tuple, ast.ListComp, ast.comprehension, ast.Attribute)):
            return False
        cur = parent


@dataclass
class _GradState:
    """What ``owner.grad`` holds while walking a trace."""

    backward: Event | None = None  # the last backward that accumulated into it
    consumed: Event | None = None  # a read of it after that backward
    zeroed: Event | None = None  # a tape.zero()/reset() that cleared it after that backward
    tapes: set[int] = field(default_factory=set)  # tapes whose backward registered it


@dataclass
class _Recording:
    """What one tape has recorded since it was created or reset."""

    read: dict[int, Buffer] = field(default_factory=dict)
    written: set[int] = field(default_factory=set)

    def add(self, ev: Event) -> None:
        for buf in true_reads(ev):
            root = buf.root()
            if root.requires_grad and root.grad_of is None:
                self.read.setdefault(root.id, root)
        self.written.update(b.root().id for b in ev.writes)

    def leaves(self) -> set[int]:
        return {k for k in self.read if k not in self.written}


def _walk_grads(trace: Trace) -> Iterator[tuple[int, Event, dict[int, _GradState], dict[int, _Recording]]]:
    """Walk the trace keeping, per parameter, the state of its ``.grad``; yields before each event
    ``(index, event, states, recordings)`` where ``recordings[tape].leaves()`` are the parameters that
    tape's next backward will accumulate into (empty right after a backward)."""
    states: dict[int, _GradState] = {}
    recordings: dict[int, _Recording] = {}
    pending: dict[int, _Recording] = {}  # recorded since the tape's last backward
    for idx, ev in enumerate(trace.events):
        tape = tape_of(ev)
        if tape is not None and ev.kind in DIFFERENTIABLE:
            recordings.setdefault(tape, _Recording()).add(ev)
            pending.setdefault(tape, _Recording()).add(ev)
        yield idx, ev, states, pending
        if ev.kind == "backward" and ev.tape is not None:
            for pid in recordings[ev.tape].leaves() if ev.tape in recordings else ():
                st = states.setdefault(pid, _GradState())
                st.backward, st.consumed, st.zeroed = ev, None, None
                st.tapes.add(ev.tape)
            pending.pop(ev.tape, None)
        elif ev.kind in ("tape_zero", "tape_reset") and ev.tape is not None:
            for st in states.values():
                if ev.tape in st.tapes and st.backward is not None:
                    st.zeroed, st.consumed = ev, None
            if ev.kind == "tape_reset":
                recordings.pop(ev.tape, None)
                pending.pop(ev.tape, None)
        elif ev.kind == "grad_zero":
            for buf in ev.writes:
                if buf.grad_of is not None and buf.grad_of.root().id in states:
                    st = states[buf.grad_of.root().id]
                    st.backward, st.consumed, st.zeroed = None, None, None
        for buf in ev.reads:
            if buf.grad_of is not None and ev.kind != "grad_zero":
                st = states.get(buf.grad_of.root().id)
                if (
                    st is not None
                    and st.backward is not None
                    and st.consumed is None
                    and ev.kind != "backward"
                ):
                    st.consumed = ev


class MissingZero(Rule):
    id = "WF301"
    name = "missing-zero"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "call `tape.zero()` after the gradient is consumed"
    doc = RuleDoc(
        what=(
            "Flags a backward pass that accumulates into a parameter's `.grad` which still holds the "
            "gradient of an earlier backward that was already consumed (read by an optimizer step, copied, "
            "printed), with no `tape.zero()`, `tape.reset()` or `param.grad.zero_()` in between; and a "
            "tape re-entered every iteration without `reset()` whose new recording uses the arrays of the "
            "launches its earlier backward already replayed (the backward in a method is followed through "
            "its callers' loops)."
        ),
        why=(
            "`tape.backward()` adds into `.grad`. Without zeroing, iteration k's gradient is the sum of the "
            "gradients of iterations 0..k: each one is right, the sum is not, and training diverges or "
            "stalls while every single backward looks correct."
        ),
        example="""
tape = wp.Tape()
for it in range(iters):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=n, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=n, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
        use_instead="""
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.zero()
""",
        fix="Safe: `tape.zero()` after the gradient is consumed clears exactly what the next backward adds to.",
    )
    VALID = [
        Example(
            _KERNELS
            + """
for it in range(20):
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.zero()
""",
        ),
        Example(
            _KERNELS
            + """
for it in range(20):
    loss.zero_()
    w.grad.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
        ),
        Example(
            _KERNELS
            + """
w_np = np.zeros(2)
for it in range(20):
    params = wp.array(w_np, dtype=float, requires_grad=True)
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, params], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    w_np = w_np - 0.1 * params.grad.numpy()
""",
            note="a fresh parameter array (and so a fresh .grad) every iteration",
        ),
    ]
    INVALID = [
        Example(
            _KERNELS
            + """
for it in range(20):
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)  # expect: WF301
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
            expected_fix=_KERNELS
            + """
for it in range(20):
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)  # expect: WF301
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.zero()
""",
        ),
        Example(
            _KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)  # expect: WF301
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.zero()
""",
            note="one tape re-entered every iteration without reset(): each backward replays all earlier ones",
            expected_fix=_KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)  # expect: WF301
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.reset()
""",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for trace in project.traces:
            events = trace.events
            for idx, ev, states, _pending in _walk_grads(trace):
                if ev.kind != "backward" or ev.tape is None:
                    continue
                replayed = _rerecorded(events, idx, ev.tape)
                if replayed is not None:
                    tape_name = str(ev.detail.get("tape_name") or "tape")
                    yield self.finding(
                        ev.span,
                        f"`{tape_name}` records this iteration on top of what its backward at "
                        f"{line_ref(replayed[1].span, ev.span)} already replayed (no `{tape_name}.reset()` "
                        f"in between): this backward replays the old launches too, on the same arrays, so "
                        f"gradients grow x1, x2, x3 over iterations; call `{tape_name}.reset()` before recording again",
                        data={"tape": tape_name, "rerecorded": True},
                        related=((replayed[0].span, "recorded before the earlier backward"),
                                 (replayed[1].span, "earlier backward")),
                    )
                    continue
                stale = []
                for pid, buf in _leaves(events, ev.tape, _recording_start(events, idx, ev.tape), idx).items():
                    st = states.get(pid)
                    if st is None or st.backward is None or st.consumed is None or st.zeroed is not None:
                        continue
                    if exclusive(st.backward, ev) or st.backward is ev:
                        continue
                    stale.append((buf, st))
                if not stale:
                    continue
                first = stale[0][1]
                consumed = first.consumed
                assert consumed is not None and first.backward is not None
                names = ", ".join(f"`{buf.label}.grad`" for buf, _ in stale)
                tape_name = str(ev.detail.get("tape_name") or "tape")
                earlier = (
                    f"the previous iteration's backward ({line_ref(first.backward.span, ev.span)})"
                    if first.backward.span == ev.span
                    else f"the backward at {line_ref(first.backward.span, ev.span)}"
                )
                yield self.finding(
                    ev.span,
                    f"`{tape_name}.backward` adds into {names}, which still holds the gradient of {earlier}, "
                    f"already consumed at {line_ref(consumed.span, ev.span)}: gradients are summed over "
                    f"iterations; call `{tape_name}.zero()` after the gradient is consumed",
                    data={"tape": tape_name, "arrays": [buf.label for buf, _ in stale]},
                    related=(
                        (first.backward.span, "earlier backward"),
                        (consumed.span, "gradient consumed here"),
                    ),
                )


def _rerecorded(events: list[Event], idx: int, tape: int) -> tuple[Event, Event] | None:
    """(an old launch, the earlier backward) when the backward at ``idx`` replays launches its tape
    recorded before an earlier backward, without a reset, on arrays the new recording uses again."""
    prev = None
    for j in range(idx - 1, -1, -1):
        e = events[j]
        if e.tape == tape and e.kind == "tape_reset":
            return None
        if e.tape == tape and e.kind == "backward":
            prev = j
            break
    if prev is None:
        return None
    old = [e for e in events[_recording_start(events, prev, tape):prev]
           if tape_of(e) == tape and e.kind in DIFFERENTIABLE]
    new = [e for e in events[prev + 1:idx] if tape_of(e) == tape and e.kind in DIFFERENTIABLE]
    # an old launch's output that the new recording uses again gets its adjoint seeded (or fed) twice
    old_outputs = {b.root().id for e in old for b in outputs(e)}
    shared = [e for e in new if old_outputs & {b.root().id for b in (*outputs(e), *e.reads)}]
    return (old[0], events[prev]) if shared and not exclusive(events[prev], events[idx]) else None


def _recording_start(events: list[Event], idx: int, tape: int) -> int:
    """Index after the previous backward/reset of ``tape`` before ``idx``."""
    for j in range(idx - 1, -1, -1):
        ev = events[j]
        if ev.tape == tape and ev.kind in ("backward", "tape_reset"):
            return j + 1
    return 0


def _next_backward(events: list[Event], idx: int, tape: int) -> Event | None:
    for ev in events[idx + 1 :]:
        if ev.tape == tape and ev.kind == "tape_reset":
            return None
        if ev.tape == tape and ev.kind == "backward":
            return ev
    return None


class ScopeHygiene(Rule):
    id = "WF302"
    name = "scope-hygiene"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "move the statement after `tape.backward(...)`"
    doc = RuleDoc(
        what=(
            "Flags work placed inside `with tape:` after the last op that writes the loss: metrics, "
            "optimizer steps, copies, state resets."
        ),
        why=(
            "Everything inside the block is recorded and replayed backwards. Work after the loss adds "
            "write-after-read hazards against arrays the forward already consumed (an optimizer step "
            "overwrites the parameters the adjoints replay against) and inflates the backward pass."
        ),
        example="""
with tape:
    wp.launch(predict, dim=n, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=n, inputs=[y, target], outputs=[loss])
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])   # recorded, and runs before backward
tape.backward(loss)
""",
        use_instead="""
with tape:
    wp.launch(predict, dim=n, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
        fix="Safe: the moved work does not feed the loss, so forward values are unchanged.",
    )
    VALID = [
        Example(
            _KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.reset()
""",
        ),
    ]
    INVALID = [
        Example(
            _KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
        loss_host = wp.clone(loss, device="cpu")  # expect: WF302
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.reset()
""",
            expected_fix=_KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    loss_host = wp.clone(loss, device="cpu")  # expect: WF302
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.reset()
""",
        ),
    ]

    _WORK = frozenset({"launch", "copy", "clone", "assign", "zero", "fill", "host_write"})

    def check(self, project: Project) -> Iterator[Finding]:
        for trace in project.traces:
            events = trace.events
            for idx, bwd in enumerate(events):
                if bwd.kind != "backward" or bwd.tape is None or not bwd.reads:
                    continue
                loss = bwd.reads[0].root()
                scope = next((e.tapes[-1] for e in reversed(events[:idx]) if tape_of(e) == bwd.tape), None)
                if scope is None:
                    continue
                in_scope = [
                    (j, e) for j, e in enumerate(events[:idx]) if e.recorded and e.tapes[-1] == scope
                ]
                writers = [j for j, e in in_scope if any(b.root().id == loss.id for b in outputs(e))]
                if not writers:
                    continue
                loss_ev = events[writers[-1]]
                loss_site = _site_in(loss_ev, scope.span)
                seen: set[Span] = set()
                for j, ev in in_scope:
                    if j <= writers[-1] or ev.kind not in self._WORK or exclusive(ev, loss_ev):
                        continue
                    where = _site_in(ev, scope.span)
                    if where is None or where == loss_site or where in seen:
                        continue
                    seen.add(where)
                    tape_name = str(bwd.detail.get("tape_name") or "tape")
                    yield self.finding(
                        where,
                        f"{_describe(ev)} runs inside `with {tape_name}:` after the loss `{bwd.name_of(loss)}` "
                        f"is computed ({line_ref(loss_ev.span, where)}): it is recorded and replayed by "
                        f"`{tape_name}.backward` ({line_ref(bwd.span, where)}); move it after the backward",
                        data={"tape": tape_name},
                        related=((loss_ev.span, "loss computed here"), (bwd.span, "backward here")),
                    )


def _site_in(ev: Event, block: Span) -> Span | None:
    """The statement of ``block`` (a with-statement span) through which ``ev`` runs."""
    for call in ev.call_stack:
        if contains(block, call):
            return call
    return ev.span if contains(block, ev.span) else None


def _tape_name(ev: Event) -> str:
    return str(ev.detail.get("tape_name") or "tape")


def _describe(ev: Event) -> str:
    if ev.kind == "launch":
        name = ev.kernel.name if ev.kernel else ev.detail.get("kernel", "?")
        return f"launch of `{name}`"
    if ev.kind in ("zero", "fill"):
        return f"`{ev.name_of(ev.writes[0])}.{ev.kind}_()`" if ev.writes else f"`{ev.kind}_()`"
    if ev.kind == "host_write":
        return "host write to " + ", ".join(f"`{ev.name_of(b)}`" for b in ev.writes)
    return f"`wp.{ev.kind}`" if ev.kind != "assign" else "`assign`"


class WriteBeforeBackward(Rule):
    id = "WF303"
    name = "write-before-backward"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "move the write after `tape.backward(...)`"
    doc = RuleDoc(
        what=(
            "Flags a write (launch, copy, assign, `zero_`/`fill_`, in-place numpy) to an array that a tape "
            "recorded as read, placed after the recording but before that tape's backward."
        ),
        why=(
            "Backward replays the adjoints against the arrays' *current* contents: a state reset or "
            "in-place update between the recording and `tape.backward()` makes them differentiate values "
            "the forward never saw. The write is not recorded, so the overwrite tracker says nothing."
        ),
        example="""
with tape:
    wp.launch(step, dim=n, inputs=[q, v], outputs=[q_next])
    wp.launch(loss_kernel, dim=n, inputs=[q_next], outputs=[loss])
q.zero_()              # reset for the next episode, before backward
tape.backward(loss)
""",
        use_instead="""
tape.backward(loss)
q.zero_()
""",
        fix="Safe: the backward no longer sees the write; everything after it sees the same values.",
    )
    VALID = [
        Example(
            _KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
loss.zero_()
tape.backward(loss)
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
            note="loss is only accumulated into on the tape: its values are not replayed",
        ),
    ]
    INVALID = [
        Example(
            _KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])  # expect: WF303
tape.backward(loss)
""",
            expected_fix=_KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
tape.backward(loss)
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])  # expect: WF303
""",
        ),
        Example(
            _KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
y.zero_()  # expect: WF303
tape.backward(loss)
""",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for trace in project.traces:
            events = trace.events
            reads: dict[int, dict[int, Event]] = {}  # tape -> buffer root id -> recorded reader
            for idx, ev in enumerate(events):
                if ev.kind in ("backward", "tape_reset") and ev.tape is not None:
                    reads.pop(ev.tape, None)
                    continue
                tape = tape_of(ev)
                if ev.kind in WRITES:
                    for other, readers in reads.items():
                        if other == tape:
                            continue
                        hit = next(
                            (
                                (b, readers[b.root().id])
                                for b in outputs(ev)
                                if b.root().id in readers and not exclusive(ev, readers[b.root().id])
                            ),
                            None,
                        )
                        if hit is None:
                            continue
                        bwd = _next_backward(events, idx, other)
                        if bwd is None:
                            continue
                        buf, reader = hit
                        where = anchor(ev, bwd)
                        yield self.finding(
                            where,
                            f"{_describe(ev)} overwrites `{ev.name_of(buf)}`, which the tape read at "
                            f"{line_ref(reader.span, where)}, before that tape's backward "
                            f"({line_ref(bwd.span, where)}): backward replays the adjoints against the new "
                            f"contents; move the write after the backward",
                            data={"tape": _tape_name(bwd)},
                            related=((reader.span, "read on the tape here"), (bwd.span, "backward here")),
                        )
                if tape is not None and ev.kind in DIFFERENTIABLE:
                    readers = reads.setdefault(tape, {})
                    for buf in true_reads(ev):
                        if buf.grad_of is None:
                            readers.setdefault(buf.root().id, ev)


class StaleGradRead(Rule):
    id = "WF304"
    name = "stale-grad-read"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "move the `.grad` read after the backward (or before `tape.zero()`)"
    doc = RuleDoc(
        what=(
            "Flags a read of `x.grad` (an optimizer launch, `.numpy()`, a copy) before the backward that "
            "produces it, or after a `tape.zero()`/`tape.reset()` cleared it."
        ),
        why=(
            "Before the backward `.grad` still holds the previous iteration's gradient (or zeros); after "
            "`tape.zero()` it holds zeros. Either way the optimizer steps with the wrong gradient, "
            "silently."
        ),
        example="""
tape.backward(loss)
tape.zero()
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])   # w.grad is all zeros here
""",
        use_instead="""
tape.backward(loss)
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
tape.zero()
""",
        fix="Safe: the read moves to where the gradient it means exists.",
    )
    VALID = [
        Example(
            _KERNELS
            + """
optimizer_grads = [w.grad]
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, optimizer_grads[0], 0.1])
    tape.reset()
""",
            note="taking a reference to .grad before the loop reads nothing",
        ),
    ]
    INVALID = [
        Example(
            _KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    tape.reset()
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])  # expect: WF304
""",
            expected_fix=_KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])  # expect: WF304
    tape.reset()
""",
        ),
        Example(
            _KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
print("gradient", w.grad.numpy())  # expect: WF304
tape.backward(loss)
""",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for trace in project.traces:
            events = trace.events
            for idx, ev, states, pending in _walk_grads(trace):
                if ev.kind != "grad_read":
                    continue
                grad = next((b for b in ev.reads if b.grad_of is not None), None)
                if grad is None or grad.grad_of is None:
                    continue
                src = project.files.get(ev.span.path)
                if src is None:
                    continue
                if _is_reference(src.parents, ev.node):
                    continue
                owner = grad.grad_of.root()
                name = ev.name_of(grad)
                for tape, recording in pending.items():
                    bwd = _next_backward(events, idx, tape) if owner.id in recording.leaves() else None
                    if bwd is not None and runs_with(bwd, ev):
                        where = anchor(ev, bwd)
                        yield self.finding(
                            where,
                            f"`{name}` is read before the backward that produces it "
                            f"({line_ref(bwd.span, where)}): it still holds the previous gradient (or zeros)",
                            data={"tape": _tape_name(bwd)},
                            related=((bwd.span, "gradient produced here"),),
                        )
                        break
                else:
                    st = states.get(owner.id)
                    if st is None or st.zeroed is None or st.backward is None or not runs_with(st.zeroed, ev):
                        continue
                    zero = st.zeroed
                    where = anchor(ev, zero)
                    call = "reset" if zero.kind == "tape_reset" else "zero"
                    yield self.finding(
                        where,
                        f"`{name}` is read after `{zero.detail.get('tape_name') or 'tape'}.{call}()` "
                        f"({line_ref(zero.span, where)}) cleared the gradient of the backward at "
                        f"{line_ref(st.backward.span, where)}: it reads zeros",
                        data={"tape": _tape_name(zero)},
                        related=(
                            (zero.span, "gradient cleared here"),
                            (st.backward.span, "gradient produced here"),
                        ),
                    )
