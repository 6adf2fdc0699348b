"""WF1xx: write-after-read overwrites (checklist section 1).

Warp keeps gradients only for the last write to an array: when an array read by a recorded op
is later overwritten on the same tape, the earlier op's adjoint replays against the new
contents. The rules below share one analysis of the host traces: every recorded read of a
buffer whose value the reader's adjoint needs (a kernel that uses the value non-linearly, in a
branch or as an index; see :mod:`warpfix.model.value_reads`) is remembered per tape until that tape's
backward or reset; a later recorded *overwrite* of the same buffer (a store in a kernel, a
copy/assign into it) is a hazard. ``zero_``/``fill_`` count any earlier value read: they are
not recorded, so the adjoint accumulated in the array is never consumed either.

Each hazardous write is reported once, under the most specific rule: WF101 (copy/assign),
WF105 (zero/fill), WF106/WF107 (a kernel reading and overwriting its own argument, reported at
the kernel's store), WF103 (the two names became one buffer through a Python rebinding,
reported at the rebinding) and otherwise WF104 (at the swap when there is one, else at the
launch).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from warpfix.finding import Span
from warpfix.model.facts import Buffer, Event, Trace
from warpfix.model.project_files import package_root
from warpfix.model.slabs import touched_slab
from warpfix.model.tapeflow import RESET_KINDS, conditional_launch, forget_reset_tape
from warpfix.model.value_reads import (
    event_overwrites,
    event_sensitive_reads,
    event_value_reads,
    rmw_store_spans,
    tape_ids,
)

if TYPE_CHECKING:
    from warpfix.model import Project


@dataclass(frozen=True)
class Touch:
    """One access of a buffer by an event."""

    event: Event
    buffer: Buffer
    param: str | None

    @property
    def name(self) -> str:
        texts = self.event.detail.get("param_text")  # a library call: what the caller passed
        if isinstance(texts, dict) and self.param in texts:
            return texts[self.param]
        node = self.event.arg_nodes.get(self.param) if self.param is not None else None
        if node is not None:  # one array passed twice (``[x] * n`` slots): the text of this argument
            return ast.unparse(node)
        return self.event.name_of(self.buffer)

    @property
    def library_path(self) -> tuple[object, str] | None:
        """(library call, path from its parameters) when a library call made this access."""
        paths = self.event.detail.get("param_paths")
        if isinstance(paths, dict) and self.param in paths:
            return self.event.detail.get("lib_call"), paths[self.param]
        return None

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

    @property
    def conditional(self) -> bool:
        """The read or the overwrite is a :func:`~warpfix.model.tapeflow.conditional_launch`."""
        return conditional_launch(self.read.event) or conditional_launch(self.write.event)

    @property
    def library_in_place(self) -> bool:
        """Both accesses are a library's own launches, and the overwrite updates in place a path of
        the call's arguments that the same launch reads (newton's featherstone step rewrites
        ``state_in.joint_q`` / ``state_in.body_q`` of the state the previous step wrote): the user's
        states are distinct, and no fresh allocation in the user's code can change it."""
        read, write = self.read.event, self.write.event
        paths = write.detail.get("param_paths")
        if "library" not in read.detail or not isinstance(paths, dict) or self.write.param not in paths:
            return False
        written = paths[self.write.param]
        return any(p is not None and paths.get(p) == written for _, p in event_value_reads(write))


def hazard_data(hz: Hazard, **data: object) -> dict[str, object]:
    """A hazard finding's ``data``, with ``conditional`` when the hazard may not happen, or
    ``library_in_place`` when it lies in a library's own chaining of its calls: the finding is then
    not taped (a warning with no automatic edit, like a kernel finding whose launches are all
    conditional)."""
    if hz.conditional:
        data = {**data, "conditional": True}
    if hz.library_in_place:
        data = {**data, "library_in_place": True}
    return data


ReadsFn = Callable[[Event], list[tuple[Buffer, str | None]]]
Slabs = dict[int | None, Touch]  # the first remembered read of each slab of one buffer (None: the whole buffer)


def _segments(trace: Trace, reads: ReadsFn) -> Iterator[tuple[int, Event, dict[int, dict[int, Slabs]]]]:
    """Walk the trace; yield (index, event, live reads) where live reads map tape id -> buffer id -> slab
    (:mod:`warpfix.model.slabs`, None for the whole buffer) -> the first recorded read (as ``reads`` defines
    it) of that slab since the tape's last backward/reset. Reads of the yielded event are added after it is
    yielded (a launch never hazards itself)."""
    live: dict[int, dict[int, Slabs]] = {}
    for pos, ev in enumerate(trace.events):
        if forget_reset_tape(ev, live):
            continue
        yield pos, ev, live
        if not ev.recorded:
            continue
        for buf, param in reads(ev):
            for tape in tape_ids(ev):
                slabs = live.setdefault(tape, {}).setdefault(buf.id, {})
                slabs.setdefault(touched_slab(ev, param), Touch(ev, buf, param))


def _earlier_read(slabs: Slabs | None, slab: int | None) -> Touch | None:
    """The first remembered read (``slabs``: of one buffer, in the order read) that a write of ``slab`` (None:
    the whole buffer) overwrites."""
    for read, touch in (slabs or {}).items():
        if not _apart(read, slab):
            return touch
    return None


def unresolved_element(buf: Buffer) -> bool:
    """The buffer stands for ``xs[expr]`` with an index the interpreter could not evaluate: every such
    access shares one abstract buffer, so its reads and writes need not touch the same array."""
    if buf.origin is not None or buf.fresh:
        return False
    return _variable_subscript(buf.label)


@lru_cache(maxsize=4096)
def _variable_subscript(label: str) -> bool:
    """``label`` reads ``xs[expr]`` with an index that is not a literal (labels repeat across roots)."""
    try:
        node = ast.parse(label, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant)


def find_hazards(trace: Trace, reads: ReadsFn = event_sensitive_reads) -> list[Hazard]:
    """Recorded overwrites of buffers already read on the same tape, in program order.

    By default a read counts when the reader's adjoint needs the value (replay hazard); WF105
    passes :func:`event_value_reads` (an unrecorded zero/fill also leaves the adjoint unconsumed).
    """
    out: list[Hazard] = []
    for pos, ev, live in _segments(trace, reads):
        if not ev.recorded:
            continue
        own = _own_reads(ev, reads)
        for buf, param in event_overwrites(ev):
            if unresolved_element(buf):
                continue
            found = False
            slab = touched_slab(ev, param)
            for tape in sorted(tape_ids(ev)):
                earlier = _earlier_read(live.get(tape, {}).get(buf.id), slab)
                if earlier is not None and earlier.event is not ev:
                    write = Touch(ev, buf, param)
                    if earlier.library_path is not None and earlier.library_path == write.library_path:
                        continue  # inside one library call, through one path: the library's own business
                    out.append(Hazard(trace, earlier, write, pos))
                    found = True
                    break
            mine = own.get(buf.id)
            if (not found and mine is not None and param is not None and mine.param != param
                    and not _apart(touched_slab(ev, mine.param), slab)):
                out.append(Hazard(trace, mine, Touch(ev, buf, param), pos))
    return out


def _apart(a: int | None, b: int | None) -> bool:
    """Two known, different slabs of one buffer (None: the whole buffer, which meets every slab)."""
    return a is not None and b is not None and a != b


def _own_reads(ev: Event, reads: ReadsFn) -> dict[int, Touch]:
    """The buffers a project launch reads (as ``reads`` counts them) through a parameter: one it also
    overwrites through another parameter (``inputs=[z], outputs=[z]``) is overwritten under its own read, so
    the launch's adjoint replays against the values it wrote. A library's launches are left to the chaining
    of its calls (``solver.step(s, s)``)."""
    if ev.kind != "launch" or ev.kernel is None or ev.detail.get("library"):
        return {}
    own: dict[int, Touch] = {}
    for buf, param in reads(ev):
        if param is not None:
            own.setdefault(buf.id, Touch(ev, buf, param))
    return own


def _is_swap(ev: Event) -> bool:
    """``a, b = b, a`` (the targets are a permutation of the sources), not ``q, v = q_new, v_new``."""
    targets, sources = ev.detail.get("targets"), ev.detail.get("sources")
    return isinstance(targets, list) and isinstance(sources, list) and sorted(targets) == sorted(sources)


def alias_event(hazard: Hazard, kinds: tuple[str, ...]) -> Event | None:
    """The last rebinding event (of ``kinds``) before the hazardous write that bound the buffer."""
    found = None
    for ev in hazard.trace.events[: hazard.position]:
        if ev.kind not in kinds or (ev.kind == "swap" and not _is_swap(ev)):
            continue
        if any(b.id == hazard.write.buffer.id for b in (*ev.reads, *ev.writes)):
            found = ev
    return found


def rotates(hazard: Hazard) -> bool:
    """On its tape, since the last backward or reset, the hazardous write's statement wrote this buffer
    at an earlier pass of its loop and another buffer at the pass just before: buffers used in turn
    (``states[t % 2]``, a state list that repeats two buffers), not one buffer written back every
    step."""
    ev, param = hazard.write.event, hazard.write.param
    tapes = tape_ids(ev)
    events = hazard.trace.events[: hazard.position]
    start = next((k + 1 for k in range(len(events) - 1, -1, -1) if events[k].kind in RESET_KINDS
                  and (events[k].tape is None or events[k].tape in tapes)), 0)
    written = [
        buf.id
        for e in events[start:]
        if e.kind == ev.kind and e.span == ev.span and e.call_stack == ev.call_stack and tape_ids(e) & tapes
        for buf, p in event_overwrites(e)
        if p == param
    ]
    return bool(written) and written[-1] != hazard.write.buffer.id and hazard.write.buffer.id in written


def launch_aliases(ev: Event, param: str) -> list[str]:
    """The other parameters of the launch ``ev`` bound to the array it passes as ``param``, that its kernel
    reads (``inputs=[w], outputs=[w]``: one array read and overwritten by one launch, WF106)."""
    buf, kernel = ev.binding.get(param), ev.kernel
    if buf is None or kernel is None:
        return []
    return [p for p, b in ev.binding.items()
            if p != param and b.id == buf.id and p in kernel.params and kernel.params[p].read]


def _root(name: str) -> str:
    """The name an access starts from: ``cur`` of ``cur.v``, ``states`` of ``states[t].q``."""
    return name.split(".")[0].split("[")[0]


def _binds_a_name_of(rebind: Event, hazard: Hazard) -> bool:
    """Whether the rebinding binds one of the names the hazard reads or writes the array by (``states[0] =
    states[-1]``, ``cur = nxt``), not another name (``u.dof_values = work[-1]``, which only names the slot a
    ring of buffers also reuses)."""
    target = rebind.detail.get("target")
    return not isinstance(target, str) or _root(target) in (_root(hazard.read.name), _root(hazard.write.name))


def classify(hazard: Hazard) -> str:
    """The rule that owns a hazardous write."""
    ev, param = hazard.write.event, hazard.write.param
    rebind = alias_event(hazard, ("rebind",))  # the last rebinding of the overwritten array, asked once
    if rebind is not None and rebind.detail.get("repeat") and (
            hazard.read.name != hazard.write.name or hazard.read.event.loops != ev.loops):
        # ``[x] * n`` made the slots one array: the cause, whatever op overwrites it (``res[t]`` read at one
        # pass of the loop and overwritten as ``res[t]`` at the next names two slots)
        return "WF103"
    if ev.kind in ("copy", "assign") and rotates(hazard):
        return "WF104"  # the copy lands in a buffer of a rotation: the buffer reuse is the bug, not the copy
    if ev.kind in ("copy", "assign"):
        return "WF101"
    if ev.kind in ("zero", "fill"):
        return "WF105"
    if param is not None and "." in param:
        field_bound = rebind is not None and rebind.detail.get("target") in (hazard.read.name, hazard.write.name)
        if field_bound or _root(hazard.read.name) == _root(hazard.write.name):
            # a struct's field overwritten under the name it was read by, or bound to the array it aliases
            # (`data.dst_keys = self._prev_keys`); under the two names of a rotation (`cur`, `nxt`): WF104's
            return "WF107"
    if ev.kernel is not None and param is not None and rmw_store_spans(ev.kernel, param):
        return "WF106"
    if hazard.read.name != hazard.write.name and rebind is not None and _binds_a_name_of(rebind, hazard):
        return "WF103"  # read and overwritten under two names that a rebinding made one array
    if ev.kernel is not None and param is not None and not ev.detail.get("library") and launch_aliases(ev, param):
        # the program's own launch reads the array it overwrites: a read-modify-write through two arguments
        # (a library step handed one state as input and output stays the states' ping-pong)
        return "WF106"
    return "WF104"


def trace_hazards(project: Project, trace: Trace, rule_id: str) -> tuple[list[Hazard], list[Hazard]]:
    """The hazards of ``trace`` owned by ``rule_id``: (taped ones, conditional or library-internal
    ones). Zero/fill (WF105) and, before Warp 1.17, copies (WF101: the old copy adjoint overwrote
    and mis-routed gradients) are hazards after any value read; otherwise only after a read whose
    adjoint needs the value. The hazards of a trace are found and classified once for all rules."""
    any_read = rule_id == "WF105" or (rule_id == "WF101" and tuple(project.warp_version) < (1, 17))
    key = "hazards:value" if any_read else "hazards:sensitive"
    found = trace.memo.get(key)
    if found is None:
        reads = event_value_reads if any_read else event_sensitive_reads
        found = trace.memo[key] = [(hz, classify(hz)) for hz in find_hazards(trace, reads)]
    now: list[Hazard] = []
    later: list[Hazard] = []
    for hz, owner in found:  # type: ignore[attr-defined]
        if owner != rule_id or (hz.library_in_place and _own_library(hz)):
            continue
        (later if hz.conditional or hz.library_in_place else now).append(hz)
    return now, later


class HazardStream:
    """A rule's hazards over the streamed traces (:func:`trace_hazards`): each trace's taped ones
    as the trace comes, the conditional or library-internal ones of every trace at the end, so
    that a finding reported at one place for several hazards takes a taped one's verdict."""

    def __init__(self, rule_id: str) -> None:
        self.rule_id = rule_id
        self.later: list[Hazard] = []

    def of_trace(self, project: Project, trace: Trace) -> list[Hazard]:
        now, later = trace_hazards(project, trace, self.rule_id)
        self.later.extend(later)
        return now

    def rest(self) -> list[Hazard]:
        return self.later


def _own_library(hz: Hazard) -> bool:
    """The library whose own chaining holds the hazard is the package of the calling file itself
    (``check newton/tests`` replays ``newton``'s solver from its summary). ``check`` of the whole
    package follows that code as the project's and reports it at the library's own lines, if at
    all; at the caller's line it would appear only because the rest of the package was not given."""
    top = str(hz.write.event.detail.get("library", "")).partition(".")[0]
    root = package_root(hz.write.event.span.path)
    return bool(top) and root is not None and os.path.basename(root) == top


def read_related(hz: Hazard) -> tuple[tuple[Span, str], ...]:
    return ((hz.read.event.span, f"`{hz.read.name}` read here by {hz.read.describe()}"),)
