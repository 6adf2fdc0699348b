"""The state of each parameter's ``.grad`` along a host trace (backward, consumed, zeroed), as the
WF3xx tape-lifecycle rules walk it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from warpfix.model.facts import Buffer, Event, Trace, exclusive
from warpfix.model.tapeflow import DIFFERENTIABLE, next_backward, runs_with, tape_of, true_reads


@dataclass
class GradState:
    """What ``owner.grad`` holds while walking a trace."""

    backward: Event | None = None  # the last backward that accumulated into it
    consumed: Event | None = None  # a read of it after that backward
    zeroed: Event | None = None  # a tape.zero()/reset() that cleared it after that backward
    tapes: set[int] = field(default_factory=set)  # tapes whose backward registered it
    # graph launches since that backward that may replay a captured backward (or zero), under an
    # ``if`` the backward is not under: they leave the state unknown only on their own arm
    replays: list[Event] = field(default_factory=list)

    def replayed_before(self, ev: Event) -> bool:
        """Whether, on every path to ``ev``, a graph launch the model did not follow ran since the
        backward (what the gradient holds at ``ev`` is then unknown)."""
        return _covers([_extra_arms(z, ev, self.backward) for z in self.replays if not exclusive(z, ev)])


@dataclass
class Recording:
    """What one tape has recorded since it was created or reset (or since its last backward): the arrays
    with a gradient its ops read, those they overwrite, and those they only accumulate into."""

    read: dict[int, Buffer] = field(default_factory=dict)
    written: set[int] = field(default_factory=set)
    # id -> (array, its name at the first recorded op accumulating into it, that op)
    accumulated: dict[int, tuple[Buffer, str, Event]] = field(default_factory=dict)

    def add(self, ev: Event) -> None:
        for buf in true_reads(ev):
            root = buf.root()
            if root.requires_grad and root.grad_of is None:
                self.read.setdefault(root.id, root)
        self.written.update(b.root().id for b in ev.writes)
        for buf in ev.accums:
            root = buf.root()
            if root.requires_grad and root.grad_of is None:
                self.accumulated.setdefault(root.id, (root, ev.name_of(buf), ev))

    def leaves(self) -> set[int]:
        return {k for k in self.read if k not in self.written}

    def arrays(self) -> set[int]:
        """Every array with a gradient the recording touches (what ``tape.zero()`` clears)."""
        return set(self.read) | self.written | set(self.accumulated)

    def left_adjoints(self) -> dict[int, tuple[Buffer, str, Event]]:
        """The intermediates whose adjoint the backward leaves in ``.grad``: accumulated into, read by a
        recorded op, never overwritten by one (:mod:`warpfix.model.stale_adjoints`)."""
        return {k: v for k, v in self.accumulated.items() if k in self.read and k not in self.written}


def walk_grads(trace: Trace) -> Iterator[tuple[int, Event, dict[int, GradState], dict[int, Recording]]]:
    """Walk the trace keeping, per parameter, the state of its ``.grad``; yields before each event
    ``(index, event, states, recordings)`` where ``recordings[tape].leaves()`` are the parameters that
    tape's next backward will accumulate into (empty right after a backward)."""
    states: dict[int, GradState] = {}
    recordings: dict[int, Recording] = {}
    pending: dict[int, Recording] = {}  # recorded since the tape's last backward
    for idx, ev in enumerate(trace.events):
        tape = tape_of(ev)
        if tape is not None and ev.kind in DIFFERENTIABLE:
            recordings.setdefault(tape, Recording()).add(ev)
            pending.setdefault(tape, Recording()).add(ev)
        yield idx, ev, states, pending
        if ev.kind == "backward" and ev.tape is not None:
            for pid in recordings[ev.tape].leaves() if ev.tape in recordings else ():
                st = states.setdefault(pid, GradState())
                st.backward, st.consumed, st.zeroed, st.replays = ev, None, None, []
                st.tapes.add(ev.tape)
            pending.pop(ev.tape, None)
        elif ev.kind in ("tape_zero", "tape_reset") and ev.tape is not None:
            for st in states.values():
                if ev.tape in st.tapes and st.backward is not None:
                    st.zeroed, st.consumed, st.replays = ev, None, []
            if ev.kind == "tape_reset":
                recordings.pop(ev.tape, None)
                pending.pop(ev.tape, None)
        elif ev.kind == "capture_launch":  # a replayed backward the model did not follow: state unknown
            for st in states.values():
                if st.backward is not None and not runs_with(ev, st.backward):
                    # ``if use_graph: wp.capture_launch(g) else: <eager step>``: the eager arm keeps its state
                    st.replays.append(ev)
                else:
                    st.backward, st.consumed, st.zeroed, st.replays = None, None, None, []
        elif ev.kind == "grad_zero" and _keeps_a_gradient(ev):
            for buf in ev.writes:  # values again (after a tape.zero()), not yet read
                st = states.get(buf.grad_of.root().id) if buf.grad_of is not None else None
                if st is not None and st.backward is not None:
                    st.zeroed, st.consumed = None, None
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


def _keeps_a_gradient(ev: Event) -> bool:
    """``p.grad.assign(g)`` of values computed from a gradient (a host clip, the windows' sum written back): the
    gradient still holds what a backward produced, and the next backward adds onto it. ``assign`` of zeros clears
    it, as ``zero_()`` does."""
    if ev.detail.get("method") != "assign" or not isinstance(ev.node, ast.Call):
        return False
    return not any(isinstance(n, (ast.Name, ast.Attribute)) and (n.id if isinstance(n, ast.Name) else n.attr)
                   in ("zeros", "zeros_like") for arg in ev.node.args for n in ast.walk(arg))


def _extra_arms(ev: Event, *path: Event | None) -> tuple[tuple[int, int], ...]:
    """The ``if`` arms enclosing ``ev`` that enclose none of ``path`` (outermost first)."""
    on_path = {arm for p in path if p is not None for arm in p.branches}
    return tuple(arm for arm in ev.branches if arm not in on_path)


def _covers(conditions: list[tuple[tuple[int, int], ...]]) -> bool:
    """Whether events under these ``if``-arm conditions (one tuple per event, outermost first) run
    on every path: one runs unconditionally, or some ``if`` has such events on both of its arms."""
    if any(not c for c in conditions):
        return True
    for if_id in {c[0][0] for c in conditions}:
        arms = [[c[1:] for c in conditions if c[0] == (if_id, arm)] for arm in (0, 1)]
        if all(arms) and all(_covers(a) for a in arms):
            return True
    return False


def early_read(
    events: list[Event], idx: int, pending: dict[int, Recording], parents: dict[int, ast.AST]
) -> tuple[Buffer, Event] | None:
    """For the ``grad_read`` event at ``idx``: ``(x.grad, backward)`` when it reads the values of a
    gradient before the backward that produces it (the next backward of a tape that has recorded a
    read of ``x`` since its last backward, on every path the read takes). ``pending`` is what
    :func:`walk_grads` yields with the event; ``parents`` the read's file's parent map."""
    ev = events[idx]
    grad = next((b for b in ev.reads if b.grad_of is not None), None)
    if grad is None or grad.grad_of is None or takes_reference(parents, ev.node):
        return None
    owner = grad.grad_of.root()
    for tape, recording in pending.items():
        bwd = next_backward(events, idx, tape) if owner.id in recording.leaves() else None
        if bwd is not None and runs_with(bwd, ev):
            return grad, bwd
    return None


def takes_reference(parents: dict[int, ast.AST], node: ast.AST) -> bool:
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
