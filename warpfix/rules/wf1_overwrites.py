"""WF1xx: write-after-read overwrites (checklist section 1).

Warp keeps gradients only for the last write to an array: when an array read by a recorded op
is later overwritten on the same tape, the earlier op's adjoint replays against the new
contents. The rules below share one analysis of the host traces: every recorded *value read*
of a buffer (a kernel reads the incoming contents, or a copy/clone/assign reads its source) is
remembered per tape until that tape's backward or reset; a later recorded *overwrite* of the
same buffer (a store in a kernel, a copy/assign into it, ``zero_``/``fill_``) is a hazard.
Each hazardous write is reported once, under the most specific rule: WF101 (copy/assign),
WF105 (zero/fill), WF106/WF107 (a kernel reading and overwriting its own argument), WF103 (the
two names became one buffer through a Python rebinding) and otherwise WF104.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model.facts import Buffer, Event, KernelDef, Trace
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project

_OVERWRITE_KINDS = ("write", "rmw", "inplace_mul")
_RESET_KINDS = ("backward", "tape_reset")


# -- kernel facts ------------------------------------------------------------------------------
def value_read_params(kd: KernelDef) -> set[str]:
    """Array parameters (and struct fields) whose *incoming* contents the kernel reads.

    A read of an index that the kernel itself wrote before (write-then-read) does not count, and
    neither does accumulation (``+=``, ``wp.atomic_add``), whose adjoint does not need the value.
    """
    out: set[str] = set()
    for name, facts in kd.params.items():
        if not facts.is_array:
            continue
        written: set[str] = set()
        for acc in facts.accesses:
            if acc.kind in ("read", "rmw", "inplace_mul") and acc.index not in written:
                out.add(name)
                break
            if acc.kind in ("write", "rmw", "inplace_mul"):
                written.add(acc.index)
    return out


def overwritten_params(kd: KernelDef) -> set[str]:
    """Array parameters (and struct fields) that the kernel overwrites (``=``, ``*=``, ``/=``)."""
    return {name for name, p in kd.params.items() if p.is_array and p.has(*_OVERWRITE_KINDS)}


def _statement_at(kd: KernelDef, span: Span) -> ast.AST | None:
    for node in ast.walk(kd.node):
        if getattr(node, "lineno", None) == span.line and isinstance(node, (ast.stmt, ast.Call)):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Call)):
                return node
    return None


def rmw_store_spans(kd: KernelDef, param: str) -> list[Span]:
    """Spans of ``x[i] = f(x[i])``-style stores of ``param`` (atomic min/max/cas/exch excluded)."""
    spans = []
    for acc in kd.params[param].accesses:
        if acc.kind != "rmw":
            continue
        node = _statement_at(kd, acc.span)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            spans.append(acc.span)
    return spans


def rmw_params(kd: KernelDef) -> dict[str, list[Span]]:
    """Array parameters (``"x"``) and struct fields (``"s.x"``) that the kernel reads and then
    overwrites at the same index, with the store spans."""
    out: dict[str, list[Span]] = {}
    if kd.kind != "kernel":
        return out
    for name, facts in kd.params.items():
        if facts.is_array:
            spans = rmw_store_spans(kd, name)
            if spans:
                out[name] = spans
    return out


# -- event facts -------------------------------------------------------------------------------
def _bound(ev: Event, params: set[str]) -> list[tuple[Buffer, str | None]]:
    return [(ev.binding[p], p) for p in sorted(params) if p in ev.binding]


def event_value_reads(ev: Event) -> list[tuple[Buffer, str | None]]:
    """Buffers whose current contents the event reads (with the kernel parameter for launches)."""
    if ev.kind == "launch":
        return _bound(ev, value_read_params(ev.kernel)) if ev.kernel is not None else []
    if ev.kind in ("copy", "assign", "clone"):
        return [(b, None) for b in ev.reads]
    return []


def event_overwrites(ev: Event) -> list[tuple[Buffer, str | None]]:
    """Existing buffers whose contents the event replaces (accumulation is not an overwrite)."""
    if ev.kind == "launch":
        return _bound(ev, overwritten_params(ev.kernel)) if ev.kernel is not None else []
    if ev.kind in ("copy", "assign", "zero", "fill"):
        return [(b, None) for b in ev.writes]
    return []


def event_modifies(ev: Event) -> list[tuple[Buffer, str | None]]:
    """Buffers the event writes or accumulates into (recorded writes of any kind)."""
    if ev.kind == "launch":
        if ev.kernel is None:
            return []
        params = {n for n, p in ev.kernel.params.items() if p.is_array and p.modified}
        return _bound(ev, params)
    if ev.kind in ("copy", "assign", "zero", "fill"):
        return [(b, None) for b in ev.writes]
    return []


def tape_ids(ev: Event) -> set[int]:
    return {scope.tape for scope in ev.tapes}


@dataclass(frozen=True)
class Touch:
    """One access of a buffer by an event."""

    event: Event
    buffer: Buffer
    param: str | None

    @property
    def name(self) -> str:
        return self.event.name_of(self.buffer)

    def describe(self) -> str:
        ev = self.event
        if ev.kind == "launch" and ev.kernel is not None:
            return f"kernel `{ev.kernel.name}` (parameter `{self.param}`) at line {ev.span.line}"
        return f"`{ev.kind}` at line {ev.span.line}"


@dataclass(frozen=True)
class Hazard:
    """A recorded overwrite of a buffer that an earlier recorded op of the same tape read."""

    trace: Trace
    read: Touch
    write: Touch
    position: int  # index of the write event in trace.events


def _segments(trace: Trace) -> Iterator[tuple[int, Event, dict[int, dict[int, Touch]]]]:
    """Walk the trace; yield (index, event, live reads) where live reads map tape id -> buffer id
    -> the first recorded value read of that buffer since the tape's last backward/reset. Reads
    of the yielded event are added after it is yielded (a launch never hazards itself)."""
    live: dict[int, dict[int, Touch]] = {}
    for pos, ev in enumerate(trace.events):
        if ev.kind in _RESET_KINDS:
            if ev.tape is None:
                live.clear()
            else:
                live.pop(ev.tape, None)
            continue
        yield pos, ev, live
        if not ev.recorded:
            continue
        for buf, param in event_value_reads(ev):
            for tape in tape_ids(ev):
                live.setdefault(tape, {}).setdefault(buf.id, Touch(ev, buf, param))


def unresolved_element(buf: Buffer) -> bool:
    """The buffer stands for ``xs[expr]`` with an index the interpreter could not evaluate: every such
    access shares one abstract buffer, so its reads and writes need not touch the same array."""
    if buf.origin is not None or buf.fresh:
        return False
    try:
        node = ast.parse(buf.label, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant)


def find_hazards(trace: Trace) -> list[Hazard]:
    """Recorded overwrites of buffers already read on the same tape, in program order."""
    out: list[Hazard] = []
    for pos, ev, live in _segments(trace):
        if not ev.recorded:
            continue
        for buf, param in event_overwrites(ev):
            if unresolved_element(buf):
                continue
            for tape in sorted(tape_ids(ev)):
                earlier = live.get(tape, {}).get(buf.id)
                if earlier is not None and earlier.event is not ev:
                    out.append(Hazard(trace, earlier, Touch(ev, buf, param), pos))
                    break
    return out


def alias_event(hazard: Hazard, kinds: tuple[str, ...]) -> Event | None:
    """The last rebinding event (of ``kinds``) before the hazardous write that bound the buffer."""
    found = None
    for ev in hazard.trace.events[: hazard.position]:
        if ev.kind in kinds and any(b.id == hazard.write.buffer.id for b in (*ev.reads, *ev.writes)):
            found = ev
    return found


def classify(hazard: Hazard) -> str:
    """The rule that owns a hazardous write."""
    ev, param = hazard.write.event, hazard.write.param
    if ev.kind in ("copy", "assign"):
        return "WF101"
    if ev.kind in ("zero", "fill"):
        return "WF105"
    if param is not None and "." in param:
        return "WF107"
    if ev.kernel is not None and param is not None and rmw_store_spans(ev.kernel, param):
        return "WF106"
    if alias_event(hazard, ("rebind",)) is not None:
        return "WF103"
    return "WF104"


def hazards_for(project: Project, rule_id: str) -> Iterator[Hazard]:
    for trace in project.traces:
        for hz in find_hazards(trace):
            if classify(hz) == rule_id:
                yield hz


def _read_related(hz: Hazard) -> tuple[tuple[Span, str], ...]:
    return ((hz.read.event.span, f"`{hz.read.name}` read here by {hz.read.describe()}"),)


def _launch_args(ev: Event) -> dict[str, str]:
    return {p: ast.unparse(node) for p, node in ev.arg_nodes.items()}


def _kernel_launches(project: Project, kd: KernelDef) -> list[Event]:
    """Recorded launches of ``kd`` in every trace (one per call site)."""
    seen: dict[Span, Event] = {}
    for trace in project.traces:
        for ev in trace.events:
            if ev.kind == "launch" and ev.recorded and ev.kernel is not None:
                if ev.kernel is kd or (ev.kernel.name == kd.name and ev.kernel.path == kd.path):
                    seen.setdefault(ev.span, ev)
    return list(seen.values())


# -- rules ---------------------------------------------------------------------------------------
_FRESH_REBIND = """
tape = wp.Tape()
with tape:
    for step in range(steps):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, dt], outputs=[q_new])
        q = q_new
    wp.launch(loss_kernel, dim=n, inputs=[q], outputs=[loss])
tape.backward(loss)
"""

_KERNELS = """
import warp as wp


@wp.kernel
def integrate(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), dt: float, q_new: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q_new[i] = q[i] + v[i] * dt


@wp.kernel
def floor_contact(q: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = q[i]
    out[i] = wp.vec3(p[0], wp.max(p[1], 0.0), p[2])


@wp.kernel
def loss_kernel(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.length(q[i]))


n = 64
q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
v = wp.ones(n, dtype=wp.vec3, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""


class CopyWriteback(Rule):
    id = "WF101"
    name = "copy-writeback"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = (
        "Rebind the name to the copy's source instead of copying into an array the tape already read"
    )
    doc = RuleDoc(
        what=(
            "Flags a recorded `wp.copy(dst, src)` or `dst.assign(src)` whose destination was already read by an "
            "earlier recorded op of the same tape (typically a projection or clamp stage writing its result "
            "back into the state the integrator read)."
        ),
        why=(
            "Warp keeps gradients only for the last write to an array. The earlier op's adjoint runs in the "
            "backward pass against the array's *current* contents, which the copy replaced, so its gradient is "
            "computed at the wrong point. The forward pass is unaffected."
        ),
        example="""
with tape:
    for step in range(steps):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, dt], outputs=[q_new])   # reads q
        q_proj = wp.empty_like(q)
        wp.launch(floor_contact, dim=n, inputs=[q_new], outputs=[q_proj])
        wp.copy(q, q_proj)                                                # overwrites q
""",
        use_instead="""
with tape:
    for step in range(steps):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, dt], outputs=[q_new])
        q_proj = wp.empty_like(q)
        wp.launch(floor_contact, dim=n, inputs=[q_new], outputs=[q_proj])
        q = q_proj
""",
        fix=(
            "Safe: the copy is replaced by a rebinding of the destination (a name or an attribute such as "
            "`state.q`) to the source, so later readers see the same values in fresh memory."
        ),
        versions=(
            "Warp >= 1.17: the gradient is wrong when the copy changes values an earlier op read. Warp < 1.17: "
            "also wrong when the values are unchanged (the copy adjoint overwrote). The fix is the same."
        ),
    )
    VALID = [
        Example(_KERNELS + _FRESH_REBIND),
        Example(
            _KERNELS
            + """
tape = wp.Tape()
with tape:
    q_new = wp.empty_like(q)
    wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
    wp.launch(loss_kernel, dim=n, inputs=[q_new], outputs=[loss])
tape.backward(loss)
wp.copy(q, q_new)  # after backward: a new episode starts from here
""",
            note="a write-back after backward is a fresh start, not an overwrite on the tape",
        ),
    ]
    INVALID = [
        Example(
            _KERNELS
            + """
tape = wp.Tape()
with tape:
    for step in range(8):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
        q_proj = wp.empty_like(q)
        wp.launch(floor_contact, dim=n, inputs=[q_new], outputs=[q_proj])
        wp.copy(q, q_proj)  # expect: WF101
    wp.launch(loss_kernel, dim=n, inputs=[q], outputs=[loss])
tape.backward(loss)
""",
            expected_fix=_KERNELS
            + """
tape = wp.Tape()
with tape:
    for step in range(8):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
        q_proj = wp.empty_like(q)
        wp.launch(floor_contact, dim=n, inputs=[q_new], outputs=[q_proj])
        q = q_proj  # expect: WF101
    wp.launch(loss_kernel, dim=n, inputs=[q], outputs=[loss])
tape.backward(loss)
""",
        ),
        Example(
            {
                "main.py": """
import warp as wp

from constraints import project_floor


@wp.kernel
def integrate(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), dt: float, q_new: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q_new[i] = q[i] + v[i] * dt


class State:
    def __init__(self, n):
        self.q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        self.v = wp.ones(n, dtype=wp.vec3, requires_grad=True)


state = State(16)
tape = wp.Tape()
with tape:
    for step in range(4):
        q_new = wp.empty_like(state.q)
        wp.launch(integrate, dim=16, inputs=[state.q, state.v, 0.01], outputs=[q_new])
        project_floor(state, q_new)
""",
                "constraints.py": """
import warp as wp


@wp.kernel
def floor_contact(q: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = q[i]
    out[i] = wp.vec3(p[0], wp.max(p[1], 0.0), p[2])


def project_floor(state, q_pred):
    q_proj = wp.empty_like(q_pred)
    wp.launch(floor_contact, dim=q_pred.shape[0], inputs=[q_pred], outputs=[q_proj])
    state.q.assign(q_proj)  # expect: WF101
""",
            },
            expected_fix={
                "constraints.py": """
import warp as wp


@wp.kernel
def floor_contact(q: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = q[i]
    out[i] = wp.vec3(p[0], wp.max(p[1], 0.0), p[2])


def project_floor(state, q_pred):
    q_proj = wp.empty_like(q_pred)
    wp.launch(floor_contact, dim=q_pred.shape[0], inputs=[q_pred], outputs=[q_proj])
    state.q = q_proj  # expect: WF101
""",
            },
            note="cross-file: main.py's integrator reads state.q, constraints.py writes it back",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for hz in hazards_for(project, self.id):
            ev = hz.write.event
            dst = hz.write.name
            src = ev.name_of(ev.reads[0]) if ev.reads else ""
            op = f"wp.copy({dst}, {src})" if ev.kind == "copy" else f"{dst}.assign({src})"
            yield self.finding(
                ev.span,
                f"`{op}` overwrites `{dst}` on the tape after {hz.read.describe()} read it; that adjoint will "
                f"replay against the copied values. Rebind instead: `{dst} = {src}`",
                data={"op": ev.kind, "dst": dst, "src": src, "read_line": hz.read.event.span.line},
                related=_read_related(hz),
            )


class CopyNotLastConsumer(Rule):
    id = "WF102"
    name = "copy-not-last-consumer"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Replace the recorded copy with a trivial copy kernel (out[i] = src[i])"
    doc = RuleDoc(
        what=(
            "On Warp < 1.17, flags a recorded `wp.copy`, `wp.clone` or `array.assign` whose source is read again "
            "by a later recorded op of the same tape."
        ),
        why=(
            "Before Warp 1.17 the copy adjoint *overwrote* the source gradient instead of accumulating into it. "
            "Backward runs the later readers' adjoints first; the copy adjoint then replaces everything they "
            "accumulated in the source gradient. There is no forward overwrite, so the array-access tracker "
            "says nothing; the source gradient comes out exactly zero or off by a data-dependent factor."
        ),
        example="""
with tape:
    for step in range(steps):
        prev = wp.clone(q)            # source q is read again below
        q_new = wp.empty_like(q)
        wp.launch(verlet, dim=n, inputs=[q, prev, dt], outputs=[q_new])
        q = q_new
""",
        use_instead="""
@wp.kernel
def copy_vec3(src: wp.array(dtype=wp.vec3), dst: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    dst[i] = src[i]

with tape:
    for step in range(steps):
        prev = wp.empty_like(q)
        wp.launch(copy_vec3, dim=q.shape, inputs=[q], outputs=[prev])
        ...
""",
        fix=(
            "Safe: a trivial copy kernel has the same forward values and a correctly accumulating adjoint. "
            "Moving the copy after the source's last reader is the alternative."
        ),
        versions="Only Warp < 1.17 (fixed in 1.17: the copy adjoint accumulates). The rule is silent on newer Warp.",
    )
    _BUGGY = (
        _KERNELS
        + """
tape = wp.Tape()
with tape:
    q_start = wp.empty_like(q)
    wp.copy(q_start, q)  # expect: WF102
    q_new = wp.empty_like(q)
    wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
    wp.launch(loss_kernel, dim=n, inputs=[q_new], outputs=[loss])
    wp.launch(loss_kernel, dim=n, inputs=[q_start], outputs=[loss])
tape.backward(loss)
"""
    )
    VALID = [
        Example(_BUGGY, note="Warp >= 1.17 accumulates in the copy adjoint"),
        Example(
            _KERNELS
            + """
tape = wp.Tape()
with tape:
    q_new = wp.empty_like(q)
    wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
    q_snapshot = wp.clone(q)
    wp.launch(loss_kernel, dim=n, inputs=[q_new], outputs=[loss])
tape.backward(loss)
""",
            warp_version="1.16.0",
            note="the clone is the source's last consumer",
        ),
    ]
    INVALID = [Example(_BUGGY, warp_version="1.16.0")]

    def applies_to_warp(self, version: tuple[int, ...]) -> bool:
        return tuple(version) < (1, 17)

    def check(self, project: Project) -> Iterator[Finding]:
        if not self.applies_to_warp(project.warp_version):
            return
        for trace in project.traces:
            pending: dict[int, list[tuple[Event, Buffer]]] = {}  # tape -> copies not yet followed by a read
            for ev in trace.events:
                if ev.kind in _RESET_KINDS:
                    if ev.tape is None:
                        pending.clear()
                    else:
                        pending.pop(ev.tape, None)
                    continue
                if not ev.recorded:
                    continue
                read_ids = {buf.id for buf, _ in event_value_reads(ev)}
                for tape in tape_ids(ev):
                    still = []
                    for copy_ev, src in pending.get(tape, []):
                        if src.id in read_ids and copy_ev is not ev:
                            yield self._report(copy_ev, src, ev)
                        else:
                            still.append((copy_ev, src))
                    pending[tape] = still
                if ev.kind in ("copy", "clone", "assign") and ev.reads:
                    for tape in tape_ids(ev):
                        pending.setdefault(tape, []).append((ev, ev.reads[0]))

    def _report(self, copy_ev: Event, src: Buffer, reader: Event) -> Finding:
        name = copy_ev.name_of(src)
        what = f"kernel `{reader.kernel.name}`" if reader.kernel is not None else f"`{reader.kind}`"
        dst = copy_ev.name_of(copy_ev.writes[0]) if copy_ev.writes else ""
        return self.finding(
            copy_ev.span,
            f"recorded {copy_ev.kind} of `{name}` is not its last consumer: {what} reads `{name}` again at line "
            f"{reader.span.line}; on Warp < 1.17 the copy adjoint overwrites `{name}.grad` and discards that "
            "reader's gradient",
            data={"op": copy_ev.kind, "src": name, "dst": dst, "reader_line": reader.span.line},
            related=((reader.span, f"`{name}` read again here"),),
        )


class StateAlias(Rule):
    id = "WF103"
    name = "state-alias"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Rotate distinct buffers instead of aliasing one state to another"
    doc = RuleDoc(
        what=(
            "Flags a Python rebinding (`states[0] = states[-1]`, `cur = nxt`) that makes two state slots the same "
            "array, when a later tape then reads the array under one name and overwrites it under the other."
        ),
        why=(
            "After `states[0] = states[-1]`, the next window's first substep reads the same array that its last "
            "substep writes. The first substep's adjoint replays against the final state instead of the initial "
            "one, so gradients are silently wrong while every forward value is right."
        ),
        example="""
for it in range(iters):
    tape = wp.Tape()
    with tape:
        for s in range(substeps):
            wp.launch(step, dim=n, inputs=[states[s], ctrl], outputs=[states[s + 1]])
        wp.launch(loss_kernel, dim=n, inputs=[states[-1]], outputs=[loss])
    tape.backward(loss)
    ...
    states[0] = states[-1]            # continue from the end state: aliases states[0] and states[-1]
""",
        use_instead="""
    states[0], states[-1] = states[-1], states[0]   # rotate: the carried data, distinct buffers
""",
        fix="Safe: rotating keeps the carried data in `states[0]` and gives the last slot a different buffer.",
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def step(x: wp.array(dtype=float), u: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] + 0.1 * wp.sin(x[i]) + u[i]


@wp.kernel
def loss_kernel(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


u = wp.zeros(8, dtype=float, requires_grad=True)
s0 = wp.zeros(8, dtype=float, requires_grad=True)
s1 = wp.zeros(8, dtype=float, requires_grad=True)
s2 = wp.zeros(8, dtype=float, requires_grad=True)
states = [s0, s1, s2]
for it in range(3):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(step, dim=8, inputs=[states[0], u], outputs=[states[1]])
        wp.launch(step, dim=8, inputs=[states[1], u], outputs=[states[2]])
        wp.launch(loss_kernel, dim=8, inputs=[states[2]], outputs=[loss])
    tape.backward(loss)
    tape.zero()
"""
    VALID = [Example(_PREFIX + "    states[0], states[2] = states[2], states[0]\n")]
    INVALID = [
        Example(
            _PREFIX + "    states[0] = states[2]  # expect: WF103\n",
            expected_fix=_PREFIX + "    states[0], states[2] = states[2], states[0]  # expect: WF103\n",
        )
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for hz in hazards_for(project, self.id):
            alias = alias_event(hz, ("rebind",))
            if alias is None:
                continue
            buf = hz.write.buffer
            target = alias.detail.get("target")
            read_name, write_name = hz.read.name, hz.write.name
            yield self.finding(
                alias.span,
                f"this rebinding makes `{read_name}` and `{write_name}` the same array: {hz.read.describe()} "
                f"reads it and {hz.write.describe()} overwrites it on the same tape",
                data={
                    "target": target if isinstance(target, str) else alias.name_of(buf),
                    "value": alias.name_of(buf),
                    "read_name": read_name,
                    "write_name": write_name,
                },
                related=(*_read_related(hz), (hz.write.event.span, f"`{write_name}` overwritten here")),
            )


class PingPong(Rule):
    id = "WF104"
    name = "ping-pong"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Allocate a fresh output per step (nxt = wp.empty_like(cur) ... cur = nxt)"
    doc = RuleDoc(
        what=(
            "Flags a recorded launch that overwrites an array an earlier recorded op of the same tape read: "
            "double buffers swapped in a loop (`a, b = b, a`, `states[i % 2]`), or one scratch array (`forces`) "
            "reused by every simulation step."
        ),
        why=(
            "Step N+1 writes the buffer step N read. In the backward pass step N's adjoint replays against step "
            "N+1's values (the Warp documentation's two-step `forces` example returns `[-2, -4, -6]` instead of "
            "`[2, 4, 6]`). Nothing looks wrong in the forward pass."
        ),
        example="""
with tape:
    for step in range(steps):
        wp.launch(spring_step, dim=n, inputs=[cur, k], outputs=[nxt])
        cur, nxt = nxt, cur
""",
        use_instead="""
with tape:
    for step in range(steps):
        nxt = wp.empty_like(cur)
        wp.launch(spring_step, dim=n, inputs=[cur, k], outputs=[nxt])
        cur = nxt
""",
        fix="Safe: every step writes fresh memory; forward values are identical.",
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def spring_step(x: wp.array(dtype=wp.vec2), k: float, y: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    p = x[i]
    y[i] = p - 0.01 * k * (wp.length(p) - 1.0) * wp.normalize(p)


@wp.kernel
def loss_kernel(x: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.length(x[i]))


cur = wp.ones(32, dtype=wp.vec2, requires_grad=True)
nxt = wp.zeros(32, dtype=wp.vec2, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    for step in range(10):
"""
    _SUFFIX = """    wp.launch(loss_kernel, dim=32, inputs=[cur], outputs=[loss])
tape.backward(loss)
"""
    VALID = [
        Example(
            _PREFIX
            + """        nxt = wp.empty_like(cur)
        wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[nxt])
        cur = nxt
"""
            + _SUFFIX
        ),
        Example(
            _PREFIX
            + """        out = wp.clone(cur)
        wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[out])
        cur = out
"""
            + _SUFFIX,
            note="`out = wp.clone(inp)` ... `inp = out`: every write lands in fresh memory",
        ),
    ]
    INVALID = [
        Example(
            _PREFIX
            + """        wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[nxt])
        cur, nxt = nxt, cur  # expect: WF104
"""
            + _SUFFIX,
            expected_fix=_PREFIX
            + """        nxt = wp.empty_like(nxt)
        wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[nxt])
        cur, nxt = nxt, cur  # expect: WF104
"""
            + _SUFFIX,
        ),
        Example(
            _PREFIX.replace("    for step in range(10):\n", "")
            + """    forces = wp.zeros(32, dtype=wp.vec2, requires_grad=True)
    wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[forces])
    x1 = wp.empty_like(cur)
    wp.launch(spring_step, dim=32, inputs=[forces, 1.0], outputs=[x1])
    wp.launch(spring_step, dim=32, inputs=[x1, 2.0], outputs=[forces])  # expect: WF104
    cur = wp.empty_like(cur)
    wp.launch(spring_step, dim=32, inputs=[forces, 1.0], outputs=[cur])
"""
            + _SUFFIX,
            note="one scratch array reused by two steps (the Warp documentation's `forces` example)",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for hz in hazards_for(project, self.id):
            ev = hz.write.event
            name = hz.write.name
            kernel = ev.kernel.name if ev.kernel is not None else ""
            wrote = (
                f"kernel `{kernel}` at line {ev.span.line} overwrites `{name}` (parameter `{hz.write.param}`) after "
                f"{hz.read.describe()} read it on the same tape"
            )
            swap = alias_event(hz, ("swap",))
            if swap is not None:
                targets = swap.detail.get("targets")
                written = name if isinstance(targets, list) and name in targets else None
                yield self.finding(
                    swap.span,
                    f"this swap makes the buffers ping-pong on one tape: {wrote}; that adjoint will replay "
                    "against the new values. Allocate a fresh output per step",
                    data={"written": written, "kernel": kernel, "param": hz.write.param},
                    related=(*_read_related(hz), (ev.span, f"`{name}` overwritten here")),
                )
                continue
            yield self.finding(
                ev.span,
                f"{wrote}; that adjoint will replay against the new values. Allocate a fresh `{name}` for this step",
                data={
                    "written": None,
                    "kernel": kernel,
                    "param": hz.write.param,
                    "array": name,
                    "arg": _launch_args(ev).get(hz.write.param or "", name),
                },
                related=_read_related(hz),
            )


class ZeroFillRead(Rule):
    id = "WF105"
    name = "zero-fill-read"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Allocate a fresh array instead of zeroing/filling one the tape already read"
    doc = RuleDoc(
        what="Flags `x.zero_()` / `x.fill_(v)` on the tape when `x` was already read by a recorded op of that tape.",
        why=(
            "`zero_` and `fill_` are writes that the tape does not record and the overwrite tracker does not see. "
            "The earlier reader's adjoint replays against the zeroed contents, and the gradient accumulated in "
            "`x.grad` by later steps is never consumed, so earlier steps receive it too."
        ),
        example="""
with tape:
    for step in range(steps):
        forces.zero_()
        wp.launch(spring_forces, dim=m, inputs=[q, springs], outputs=[forces])
        wp.launch(integrate, dim=n, inputs=[q, v, forces, dt], outputs=[q_new, v_new])
        q, v = q_new, v_new
""",
        use_instead="""
with tape:
    for step in range(steps):
        forces = wp.zeros_like(forces)
        wp.launch(spring_forces, dim=m, inputs=[q, springs], outputs=[forces])
        ...
""",
        fix="Safe: `x = wp.zeros_like(x)` (or `wp.full_like`) has the same contents in fresh memory.",
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def gravity(f: wp.array(dtype=float), q: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(f, i, -9.8 - q[i] * q[i])


@wp.kernel
def integrate(q: wp.array(dtype=float), f: wp.array(dtype=float), q_new: wp.array(dtype=float)):
    i = wp.tid()
    q_new[i] = q[i] + 0.01 * f[i]


q = wp.zeros(16, dtype=float, requires_grad=True)
forces = wp.zeros(16, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    for step in range(4):
"""
    _BODY = """        wp.launch(gravity, dim=16, inputs=[forces, q])
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=16, inputs=[q, forces], outputs=[q_new])
        q = q_new
"""
    VALID = [
        Example(_PREFIX + "        forces = wp.zeros_like(forces)\n" + _BODY),
        Example(
            _PREFIX.replace("    for step in range(4):\n", "    forces.zero_()\n    for step in range(4):\n")
            + "        forces = wp.zeros_like(forces)\n"
            + _BODY,
            note="zeroing before the first read is fine",
        ),
    ]
    INVALID = [
        Example(
            _PREFIX + "        forces.zero_()  # expect: WF105\n" + _BODY,
            expected_fix=_PREFIX + "        forces = wp.zeros_like(forces)  # expect: WF105\n" + _BODY,
        )
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for hz in hazards_for(project, self.id):
            ev = hz.write.event
            name = hz.write.name
            call = "zero_()" if ev.kind == "zero" else "fill_(...)"
            yield self.finding(
                ev.span,
                f"`{name}.{call}` overwrites `{name}` on the tape after {hz.read.describe()} read it; the tape does "
                f"not record this write, so that adjoint replays against the new contents",
                data={"op": ev.kind, "array": name, "read_line": hz.read.event.span.line},
                related=_read_related(hz),
            )


class _KernelRmwRule(Rule):
    """Shared detector for WF106/WF107: a kernel that reads then overwrites its own argument."""

    struct_fields: bool = False

    def check(self, project: Project) -> Iterator[Finding]:
        for kd in project.kernels:
            launches: list[Event] | None = None
            for param, spans in rmw_params(kd).items():
                if ("." in param) != self.struct_fields:
                    continue
                if launches is None:
                    launches = _kernel_launches(project, kd)
                if not launches:
                    break
                yield self._report(kd, param, spans[0], launches)

    def _report(self, kd: KernelDef, param: str, span: Span, launches: list[Event]) -> Finding:
        base = param.partition(".")[0]
        args = [ast.unparse(ev.arg_nodes[base]) for ev in launches if base in ev.arg_nodes]
        if self.struct_fields:
            what = f"kernel `{kd.name}` reads struct field `{param}` and then overwrites the same element"
        else:
            what = f"kernel `{kd.name}` reads `{param}` and then overwrites the same element"
        lines = ", ".join(str(ev.span.line) for ev in launches)
        return self.finding(
            span,
            f"{what}, and is launched on a tape (line {lines}); the adjoint replays against the overwritten "
            "values. Write to a separate output argument instead",
            data={
                "kernel": kd.name,
                "param": param,
                "struct_param": base if self.struct_fields else None,
                "field": param.partition(".")[2] or None,
                "launch_args": args,
                "launch_lines": [f"{ev.span.path}:{ev.span.line}" for ev in launches],
            },
            related=tuple((ev.span, f"`{kd.name}` launched here on a tape") for ev in launches),
        )


class KernelRmw(_KernelRmwRule):
    id = "WF106"
    name = "kernel-rmw"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Write to a new output argument and rebind it at the launch sites"
    struct_fields = False
    doc = RuleDoc(
        what=(
            "Flags a kernel launched on a tape that reads an element of its own array argument and then "
            "overwrites the same element: `x[i] = f(x[i])`, or a clamp `if x[i] > c: x[i] = c`."
        ),
        why=(
            "The backward pass re-runs the kernel body on the array's current contents, which the forward pass "
            "already replaced. A clamp no longer sees the element out of range and passes gradient through where "
            "it should block it; `f'(x)` is evaluated at `f(x)`. Earlier readers of `x` replay against the new "
            "values too."
        ),
        example="""
@wp.kernel
def clamp_height(q: wp.array(dtype=float), q_max: float):
    i = wp.tid()
    if q[i] > q_max:
        q[i] = q_max
""",
        use_instead="""
@wp.kernel
def clamp_height(q: wp.array(dtype=float), q_max: float, q_out: wp.array(dtype=float)):
    i = wp.tid()
    q_out[i] = q[i]
    if q[i] > q_max:
        q_out[i] = q_max

# at every launch site
q_out = wp.empty_like(q)
wp.launch(clamp_height, dim=n, inputs=[q, q_max], outputs=[q_out])
q = q_out
""",
        fix="Safe: the output goes to fresh memory and the name is rebound; forward values are unchanged.",
    )
    _KERNEL = """
import warp as wp


@wp.kernel
def clamp_height(q: wp.array(dtype=float), q_max: float):
    i = wp.tid()
    if q[i] > q_max:
        q[i] = q_max  # expect: WF106


@wp.kernel
def loss_kernel(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


q = wp.full(16, 2.0, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""
    VALID = [
        Example(
            _KERNEL.replace("  # expect: WF106", "")
            + """
wp.launch(clamp_height, dim=16, inputs=[q, 1.0])
tape = wp.Tape()
with tape:
    wp.launch(loss_kernel, dim=16, inputs=[q], outputs=[loss])
tape.backward(loss)
""",
            note="the in-place clamp runs before recording starts",
        ),
        Example(
            """
import warp as wp


@wp.kernel
def accumulate(q: wp.array(dtype=float), dq: wp.array(dtype=float)):
    i = wp.tid()
    q[i] += dq[i]
    wp.atomic_add(q, 0, dq[i])


q = wp.zeros(16, dtype=float, requires_grad=True)
dq = wp.ones(16, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(accumulate, dim=16, inputs=[q, dq])
""",
            note="accumulation is not an overwrite",
        ),
    ]
    INVALID = [
        Example(
            _KERNEL
            + """
tape = wp.Tape()
with tape:
    wp.launch(clamp_height, dim=16, inputs=[q, 1.0])
    wp.launch(loss_kernel, dim=16, inputs=[q], outputs=[loss])
tape.backward(loss)
"""
        )
    ]


class StructHeldOverwrite(_KernelRmwRule):
    id = "WF107"
    name = "struct-held-overwrite"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Write to a new array field/argument and rebind it at the launch sites"
    struct_fields = True
    doc = RuleDoc(
        what=(
            "The WF101/WF106 patterns for arrays held in a `@wp.struct`: a taped kernel that reads a struct "
            "field's element and overwrites it (`s.q[i] = f(s.q[i])`), or a recorded overwrite of a struct-held "
            "array an earlier recorded op read."
        ),
        why=(
            "The same adjoint-replay corruption as WF106; in addition Warp's overwrite tracker "
            "(`wp.config.verify_autograd_array_access`) cannot see arrays inside structs, so a clean tracker run "
            "proves nothing here."
        ),
        example="""
@wp.struct
class Particles:
    q: wp.array(dtype=float)

@wp.kernel
def ground(p: Particles):
    i = wp.tid()
    if p.q[i] < 0.0:
        p.q[i] = 0.0
""",
        use_instead="""
@wp.kernel
def ground(p: Particles, q_out: wp.array(dtype=float)):
    i = wp.tid()
    q_out[i] = wp.max(p.q[i], 0.0)

q_out = wp.empty_like(particles.q)
wp.launch(ground, dim=n, inputs=[particles], outputs=[q_out])
particles = make_particles(q_out, particles.v)   # a new struct instance
""",
        fix=(
            "Safe: as WF106, then a *new* struct instance holding the fresh array. Do not assign the field of the "
            "instance that was launched (`particles.q = q_out`): the tape keeps a reference to that instance, so "
            "the earlier launch's adjoint would then run against the new field."
        ),
    )
    _CODE = """
import warp as wp


@wp.struct
class Particles:
    q: wp.array(dtype=float)
    v: wp.array(dtype=float)


@wp.kernel
def ground(p: Particles):
    i = wp.tid()
    if p.q[i] < 0.0:
        p.q[i] = 0.0  # expect: WF107


particles = Particles()
particles.q = wp.full(16, -1.0, dtype=float, requires_grad=True)
particles.v = wp.zeros(16, dtype=float, requires_grad=True)
"""
    VALID = [
        Example(
            _CODE.replace("  # expect: WF107", "")
            + """
wp.launch(ground, dim=16, inputs=[particles])
""",
            note="not on a tape",
        )
    ]
    INVALID = [
        Example(
            _CODE
            + """
with wp.Tape() as tape:
    wp.launch(ground, dim=16, inputs=[particles])
"""
        )
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        yield from super().check(project)
        for hz in hazards_for(project, self.id):
            ev = hz.write.event
            if (
                ev.kernel is not None
                and hz.write.param is not None
                and rmw_store_spans(ev.kernel, hz.write.param)
            ):
                continue  # reported at the kernel's store by the detector above
            yield self.finding(
                ev.span,
                f"kernel `{ev.kernel.name if ev.kernel else ''}` overwrites struct-held `{hz.write.param}` after "
                f"{hz.read.describe()} read it on the same tape (the overwrite tracker cannot see struct fields)",
                data={"kernel": ev.kernel.name if ev.kernel else None, "param": hz.write.param},
                related=_read_related(hz),
            )


class RawAlias(Rule):
    id = "WF108"
    name = "raw-alias"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = (
        "Write into wp.clone(x) instead of a zero-copy view, or move the mutation after backward"
    )
    doc = RuleDoc(
        what=(
            "Flags a write, before the tape's backward, through a zero-copy view (`wp.array(ptr=x.ptr, ...)`) of "
            "an array that a recorded op read (or a write to the array while a view of it was read)."
        ),
        why=(
            "The view shares memory with the taped array but is a different Python object: neither the tape nor "
            "the overwrite tracker connects the two, and the recorded op's adjoint replays against the mutated "
            "memory."
        ),
        example="""
with tape:
    wp.launch(step, dim=n, inputs=[q], outputs=[q_new])
    wp.launch(loss_kernel, dim=n, inputs=[q_new], outputs=[loss])
q_view = wp.array(ptr=q.ptr, shape=q.shape, dtype=q.dtype, device=q.device)
q_view.zero_()                        # mutates q before backward
tape.backward(loss)
""",
        use_instead="""
q_view = wp.clone(q)
q_view.zero_()
tape.backward(loss)
""",
        fix="Safe: the clone has the same contents; only the aliasing disappears.",
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def step(q: wp.array(dtype=float), q_new: wp.array(dtype=float)):
    i = wp.tid()
    q_new[i] = q[i] * q[i]


@wp.kernel
def loss_kernel(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i])


q = wp.full(16, 0.5, dtype=float, requires_grad=True)
q_new = wp.zeros(16, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(step, dim=16, inputs=[q], outputs=[q_new])
    wp.launch(loss_kernel, dim=16, inputs=[q_new], outputs=[loss])
"""
    VALID = [
        Example(
            _PREFIX
            + """tape.backward(loss)
q_view = wp.array(ptr=q.ptr, shape=q.shape, dtype=q.dtype, device=q.device)
q_view.zero_()
"""
        ),
        Example(
            _PREFIX
            + """q_view = wp.clone(q)
q_view.zero_()
tape.backward(loss)
"""
        ),
    ]
    INVALID = [
        Example(
            _PREFIX
            + """q_view = wp.array(ptr=q.ptr, shape=q.shape, dtype=q.dtype, device=q.device)
q_view.zero_()  # expect: WF108
tape.backward(loss)
""",
            expected_fix=_PREFIX
            + """q_view = wp.clone(q)
q_view.zero_()  # expect: WF108
tape.backward(loss)
""",
        )
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for trace in project.traces:
            live: dict[int, dict[int, Touch]] = {}  # tape -> root buffer id -> first recorded read
            for ev in trace.events:
                if ev.kind in _RESET_KINDS:
                    if ev.tape is None:
                        live.clear()
                    else:
                        live.pop(ev.tape, None)
                    continue
                writes = event_overwrites(ev)
                if ev.kind == "host_write":
                    writes = [(b, None) for b in ev.writes]
                for buf, _param in writes:
                    for reads in live.values():
                        earlier = reads.get(buf.root().id)
                        if earlier is None or earlier.buffer.id == buf.id or earlier.event is ev:
                            continue
                        if buf.view_of is None and earlier.buffer.view_of is None:
                            continue
                        yield self._report(ev, buf, earlier)
                        break
                if ev.recorded:
                    for buf, param in event_value_reads(ev):
                        for tape in tape_ids(ev):
                            live.setdefault(tape, {}).setdefault(buf.root().id, Touch(ev, buf, param))

    def _report(self, ev: Event, buf: Buffer, earlier: Touch) -> Finding:
        name = ev.name_of(buf)
        view = buf if buf.view_of is not None else earlier.buffer
        base = view.root()
        related = [(earlier.event.span, f"`{earlier.name}` read here by {earlier.describe()}")]
        if view.origin is not None:
            related.append((view.origin, f"`{view.label}` created here as a view of `{base.label}`"))
        return self.finding(
            ev.span,
            f"`{name}` shares memory with `{earlier.name}`, which {earlier.describe()} read on the tape; this "
            "write happens before backward and neither the tape nor the overwrite tracker sees the alias",
            data={
                "array": name,
                "view": view.label,
                "base": base.label,
                "view_line": view.origin.line if view.origin is not None else None,
            },
            related=tuple(related),
        )
