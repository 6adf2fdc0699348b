"""WF1xx: write-after-read overwrites (checklist section 1).

Warp keeps gradients only for the last write to an array: when an array read by a recorded op
is later overwritten on the same tape, the earlier op's adjoint replays against the new
contents. The rules below share one analysis of the host traces: every recorded read of a
buffer whose value the reader's adjoint needs (a kernel that uses the value non-linearly, in a
branch or as an index; see :class:`_Sensitivity`) is remembered per tape until that tape's
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
from typing import TYPE_CHECKING

from warpfix.finding import Span
from warpfix.model.facts import Buffer, Event, KernelDef, Trace
from warpfix.model.project_files import package_root
from warpfix.model.tapeflow import RESET_KINDS, conditional_launch, forget_reset_tape

if TYPE_CHECKING:
    from warpfix.model import Project


_OVERWRITE_KINDS = ("write", "rmw", "inplace_mul")


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


_LINEAR_CALLS = {
    # constructors and casts between float types: linear in every argument
    "vec2",
    "vec3",
    "vec4",
    "vector",
    "mat22",
    "mat33",
    "mat44",
    "matrix",
    "quat",
    "quaternion",
    "spatial_vector",
    "transform",
    "float32",
    "float64",
    "float16",
    "vec2f",
    "vec3f",
    "vec4f",
    "vec2d",
    "vec3d",
    "vec4d",
    "mat22f",
    "mat33f",
    "mat44f",
    "spatial_vectorf",
    "transformf",
    "quatf",
    "neg",
    "add",
    "sub",
    "transpose",
    "spatial_top",
    "spatial_bottom",
    "transform_get_translation",
}
_BILINEAR_CALLS = {"dot", "cross", "outer", "mul", "ddot", "spatial_dot", "spatial_cross", "tile_matmul"}
# tile primitives whose adjoint needs no input values (moves, stores and linear transforms)
_TILE_LINEAR = {"tile_load", "tile_store", "tile_atomic_add", "tile_fft", "tile_ifft", "tile_transpose",
                "tile_broadcast", "tile_view", "tile_add", "tile_neg", "tile_zeros", "tile_ones"}


class _Sensitivity:
    """Which array parameters' *values* a kernel's adjoint needs.

    A value read from a parameter (``x[i]``, ``s.f[i]``) taints the locals it flows into. The
    parameter is value-sensitive when a tainted value reaches a non-linear operation (a product of
    two tainted values, a division by one, any call not known to be linear), a branch condition,
    a comparison or an index. Purely linear uses (sums, scaling by untainted values, constructors,
    component access) give an adjoint that does not depend on the value read.
    """

    def __init__(self, kd: KernelDef) -> None:
        self.kd = kd
        self.params = {n for n, p in kd.params.items() if p.is_array}
        self.locals: dict[str, set[str]] = {}
        self.sensitive: set[str] = set()

    def run(self) -> set[str]:
        body = getattr(self.kd.node, "body", [])
        for _ in range(2):  # a second pass carries taint around loops
            for stmt in body:
                self.stmt(stmt)
        return self.sensitive

    def param_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name) and node.id in self.params:
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            key = f"{node.value.id}.{node.attr}"
            if key in self.params:
                return key
        return None

    def mark(self, taint: set[str]) -> None:
        self.sensitive |= taint

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            value = s.value
            taint = self.expr(value) if value is not None else set()
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                self.bind(t, taint)
        elif isinstance(s, ast.AugAssign):
            taint = self.expr(s.value)
            if isinstance(s.op, ast.Mult):
                target_taint = self.expr(s.target)
                if taint and target_taint:
                    self.mark(taint | target_taint)
            elif not isinstance(s.op, (ast.Add, ast.Sub)):
                self.mark(taint | self.expr(s.target))
            self.bind(s.target, taint, augment=True)
        elif isinstance(s, (ast.If, ast.While)):
            self.mark(self.expr(s.test))
            for b in [*s.body, *s.orelse]:
                self.stmt(b)
        elif isinstance(s, ast.For):
            self.mark(self.expr(s.iter))
            for b in [*s.body, *s.orelse]:
                self.stmt(b)
        elif isinstance(s, ast.Expr):
            self.expr(s.value)
        elif isinstance(s, ast.Return) and s.value is not None:
            self.mark(self.expr(s.value))
        else:
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.stmt):
                    self.stmt(child)
                elif isinstance(child, ast.expr):
                    self.mark(self.expr(child))

    def bind(self, target: ast.expr, taint: set[str], augment: bool = False) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind(elt, taint, augment)
        elif isinstance(target, ast.Name):
            if augment:
                self.locals.setdefault(target.id, set()).update(taint)
            else:
                self.locals[target.id] = set(taint)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            base: ast.expr = target
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                if isinstance(base, ast.Subscript):
                    self.mark(self.expr(base.slice))
                if self.param_of(base) is not None:
                    return  # a store into an array: its value is not read back through the local
                base = base.value
            if isinstance(base, ast.Name) and base.id not in self.params:
                self.locals.setdefault(base.id, set()).update(taint)

    def expr(self, e: ast.expr | None) -> set[str]:
        if e is None:
            return set()
        if isinstance(e, ast.Subscript):
            self.mark(self.expr(e.slice))
            param = self.param_of(e.value)
            if param is not None:
                return {param}
            return self.expr(e.value)
        if isinstance(e, ast.Name):
            return set(self.locals.get(e.id, set()))
        if isinstance(e, ast.Attribute):
            return set() if self.param_of(e) is not None else self.expr(e.value)
        if isinstance(e, ast.BinOp):
            left, right = self.expr(e.left), self.expr(e.right)
            if isinstance(e.op, (ast.Add, ast.Sub)):
                return left | right
            if isinstance(e.op, ast.Mult):
                if left and right:
                    self.mark(left | right)
                return left | right
            if isinstance(e.op, ast.Div):
                self.mark(right)
                return left | right
            self.mark(left | right)
            return left | right
        if isinstance(e, ast.UnaryOp):
            taint = self.expr(e.operand)
            if isinstance(e.op, ast.Not):
                self.mark(taint)
            return taint
        if isinstance(e, (ast.Compare, ast.BoolOp)):
            children = [e.left, *e.comparators] if isinstance(e, ast.Compare) else e.values
            taint = set().union(*(self.expr(c) for c in children))
            self.mark(taint)
            return taint
        if isinstance(e, ast.IfExp):
            self.mark(self.expr(e.test))
            return self.expr(e.body) | self.expr(e.orelse)
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, (ast.Tuple, ast.List)):
            return set().union(*(self.expr(x) for x in e.elts)) if e.elts else set()
        if isinstance(e, ast.Slice):
            for part in (e.lower, e.upper, e.step):
                self.mark(self.expr(part))
            return set()
        out: set[str] = set()
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                out |= self.expr(child)
        self.mark(out)
        return out

    def call(self, e: ast.Call) -> set[str]:
        func = e.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        args = [self.expr(a) for a in e.args] + [self.expr(k.value) for k in e.keywords]
        taint = set().union(*args) if args else set()
        if name not in ("atomic_add", "atomic_sub", "len", *_TILE_LINEAR):
            # a whole array handed to a function: assume the callee needs its values
            whole = {self.param_of(a) for a in [*e.args, *(k.value for k in e.keywords)]}
            self.mark({p for p in whole if p is not None})
        if name in ("atomic_add", "atomic_sub") and e.args:
            self.mark(set().union(*args[1:-1]) if len(args) > 2 else set())
            return set()
        if name in _LINEAR_CALLS or name in _TILE_LINEAR:
            return taint
        if name in _BILINEAR_CALLS:
            tainted = [a for a in args if a]
            if len(tainted) > 1:
                self.mark(taint)
            return taint
        if name in ("tid", "static", "len"):
            return set()
        self.mark(taint)
        return taint


_SENSITIVE: dict[int, tuple[KernelDef, set[str]]] = {}  # id(kd) -> (kd, params): a library kernel is met per call


def value_sensitive_params(kd: KernelDef) -> set[str]:
    """Array parameters (and struct fields) whose read values the kernel's adjoint depends on."""
    hit = _SENSITIVE.get(id(kd))
    if hit is not None and hit[0] is kd:
        return hit[1]
    if not isinstance(kd.node, ast.FunctionDef):
        out = set(value_read_params(kd))
    else:
        out = _Sensitivity(kd).run() & value_read_params(kd)
    if len(_SENSITIVE) > 20_000:
        _SENSITIVE.clear()
    _SENSITIVE[id(kd)] = (kd, out)
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


def event_sensitive_reads(ev: Event) -> list[tuple[Buffer, str | None]]:
    """Buffers whose current contents the event's adjoint needs (copies need none)."""
    if ev.kind == "launch" and ev.kernel is not None:
        return _bound(ev, value_sensitive_params(ev.kernel))
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


def _segments(trace: Trace, reads: ReadsFn) -> Iterator[tuple[int, Event, dict[int, dict[int, Touch]]]]:
    """Walk the trace; yield (index, event, live reads) where live reads map tape id -> buffer id
    -> the first recorded read (as ``reads`` defines it) of that buffer since the tape's last
    backward/reset. Reads of the yielded event are added after it is yielded (a launch never
    hazards itself)."""
    live: dict[int, dict[int, Touch]] = {}
    for pos, ev in enumerate(trace.events):
        if forget_reset_tape(ev, live):
            continue
        yield pos, ev, live
        if not ev.recorded:
            continue
        for buf, param in reads(ev):
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


def find_hazards(trace: Trace, reads: ReadsFn = event_sensitive_reads) -> list[Hazard]:
    """Recorded overwrites of buffers already read on the same tape, in program order.

    By default a read counts when the reader's adjoint needs the value (replay hazard); WF105
    passes :func:`event_value_reads` (an unrecorded zero/fill also leaves the adjoint unconsumed).
    """
    out: list[Hazard] = []
    for pos, ev, live in _segments(trace, reads):
        if not ev.recorded:
            continue
        for buf, param in event_overwrites(ev):
            if unresolved_element(buf):
                continue
            for tape in sorted(tape_ids(ev)):
                earlier = live.get(tape, {}).get(buf.id)
                if earlier is not None and earlier.event is not ev:
                    write = Touch(ev, buf, param)
                    if earlier.library_path is not None and earlier.library_path == write.library_path:
                        continue  # inside one library call, through one path: the library's own business
                    out.append(Hazard(trace, earlier, write, pos))
                    break
    return out


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


def classify(hazard: Hazard) -> str:
    """The rule that owns a hazardous write."""
    ev, param = hazard.write.event, hazard.write.param
    repeat = alias_event(hazard, ("rebind",))
    if repeat is not None and repeat.detail.get("repeat") and hazard.read.name != hazard.write.name:
        return "WF103"  # ``[x] * n`` made the slots one array: the cause, whatever op overwrites it
    if ev.kind in ("copy", "assign") and rotates(hazard):
        return "WF104"  # the copy lands in a buffer of a rotation: the buffer reuse is the bug, not the copy
    if ev.kind in ("copy", "assign"):
        return "WF101"
    if ev.kind in ("zero", "fill"):
        return "WF105"
    if param is not None and "." in param:
        return "WF107"
    if ev.kernel is not None and param is not None and rmw_store_spans(ev.kernel, param):
        return "WF106"
    if hazard.read.name != hazard.write.name and alias_event(hazard, ("rebind",)) is not None:
        return "WF103"  # read and overwritten under two names that a rebinding made one array
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
