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
from collections.abc import Callable, Iterator
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


ReadsFn = Callable[[Event], list[tuple[Buffer, str | None]]]


def _segments(trace: Trace, reads: ReadsFn) -> Iterator[tuple[int, Event, dict[int, dict[int, Touch]]]]:
    """Walk the trace; yield (index, event, live reads) where live reads map tape id -> buffer id
    -> the first recorded read (as ``reads`` defines it) of that buffer since the tape's last
    backward/reset. Reads of the yielded event are added after it is yielded (a launch never
    hazards itself)."""
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
    if hazard.read.name != hazard.write.name and alias_event(hazard, ("rebind",)) is not None:
        return "WF103"  # read and overwritten under two names that a rebinding made one array
    return "WF104"


def hazards_for(project: Project, rule_id: str) -> Iterator[Hazard]:
    """Hazards owned by ``rule_id``. Zero/fill (WF105) and, before Warp 1.17, copies (WF101: the old
    copy adjoint overwrote and mis-routed gradients) are hazards after any value read; otherwise
    only after a read whose adjoint needs the value."""
    any_read = rule_id == "WF105" or (rule_id == "WF101" and tuple(project.warp_version) < (1, 17))
    reads = event_value_reads if any_read else event_sensitive_reads
    for trace in project.traces:
        for hz in find_hazards(trace, reads):
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
    lift = wp.vec3(0.0, wp.sin(q[i][1]), 0.0)  # a height-dependent field: the adjoint needs q
    q_new[i] = q[i] + (v[i] + lift) * dt


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


_LINEAR_READER = (
    _KERNELS.replace(
        "    lift = wp.vec3(0.0, wp.sin(q[i][1]), 0.0)  # a height-dependent field: the adjoint needs q\n"
        "    q_new[i] = q[i] + (v[i] + lift) * dt\n",
        "    q_new[i] = q[i] + v[i] * dt\n",
    )
    + """
tape = wp.Tape()
with tape:
    q_new = wp.empty_like(q)
    wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
    wp.copy(q, q_new)
    wp.launch(loss_kernel, dim=n, inputs=[q], outputs=[loss])
tape.backward(loss)
"""
)


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
            _LINEAR_READER,
            note="Warp >= 1.17: the only reader of `q` is linear in it, so its adjoint does not need the old values",
        ),
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
    lift = wp.vec3(0.0, wp.sin(q[i][1]), 0.0)
    q_new[i] = q[i] + (v[i] + lift) * dt


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
        Example(
            _LINEAR_READER.replace("    wp.copy(q, q_new)\n", "    wp.copy(q, q_new)  # expect: WF101\n"),
            warp_version="1.16.0",
            note="before Warp 1.17 the copy adjoint mis-routes gradients even when the reader is linear",
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
                data={"dst": dst, "src": src},
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
                if (
                    ev.kind in ("copy", "clone", "assign")
                    and ev.reads
                    and not unresolved_element(ev.reads[0])
                ):
                    for tape in tape_ids(ev):
                        pending.setdefault(tape, []).append((ev, ev.reads[0]))

    def _report(self, copy_ev: Event, src: Buffer, reader: Event) -> Finding:
        name = copy_ev.name_of(src)
        what = f"kernel `{reader.kernel.name}`" if reader.kernel is not None else f"`{reader.kind}`"
        data = {"src": name}
        if copy_ev.kind != "clone" and copy_ev.writes:  # a clone's destination is the assignment target
            data["dst"] = copy_ev.name_of(copy_ev.writes[0])
        return self.finding(
            copy_ev.span,
            f"recorded {copy_ev.kind} of `{name}` is not its last consumer: {what} reads `{name}` again at line "
            f"{reader.span.line}; on Warp < 1.17 the copy adjoint overwrites `{name}.grad` and discards that "
            "reader's gradient",
            data=data,
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
            source = alias.detail.get("source")
            target = target if isinstance(target, str) else "?"
            source = source if isinstance(source, str) else alias.name_of(buf)
            read_name, write_name = hz.read.name, hz.write.name
            if alias.detail.get("repeat"):
                yield self.finding(
                    alias.span,
                    f"`{target}` makes every slot of the list one object `{source}`: later on one tape "
                    f"{hz.read.describe()} reads it as `{read_name}` and {hz.write.describe()} overwrites it as "
                    f"`{write_name}`, so the reader's adjoint replays against the overwritten values",
                    fix_safety=FixSafety.NONE,
                    fix_description="build the list with one fresh object per slot (`[make() for _ in range(n)]`)",
                    data={"repeat": True},
                    related=(*_read_related(hz), (hz.write.event.span, f"`{write_name}` overwritten here")),
                )
                continue
            yield self.finding(
                alias.span,
                f"`{target} = {source}` makes two state slots one array: later on one tape {hz.read.describe()} "
                f"reads it as `{read_name}` and {hz.write.describe()} overwrites it as `{write_name}`, so the "
                "reader's adjoint replays against the overwritten values",
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
            "reused by every simulation step. Only readers whose adjoint needs the values count (non-linear "
            "use, branches, indices): a purely linear reader gets the same gradient either way."
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
        Example(
            _PREFIX.replace("cur = wp.ones(", "states = [wp.ones(")
            .replace(
                "nxt = wp.zeros(32, dtype=wp.vec2, requires_grad=True)\n",
                "",
            )
            .replace(
                "requires_grad=True)\nloss",
                "requires_grad=True), wp.zeros(32, dtype=wp.vec2, requires_grad=True)]\nloss",
            )
            + """        src, dst = states[step % 2], states[(step + 1) % 2]
        wp.launch(spring_step, dim=32, inputs=[src, 2.0], outputs=[dst])  # expect: WF104
"""
            + _SUFFIX.replace("inputs=[cur]", "inputs=[states[0]]"),
            note="`states[i % 2]` double buffering",
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
                    data={"written": written} if written else {},
                    related=(*_read_related(hz), (ev.span, f"`{name}` overwritten here")),
                )
                continue
            yield self.finding(
                ev.span,
                f"{wrote}; that adjoint will replay against the new values. Allocate a fresh `{name}` for this step",
                data={"arg": _launch_args(ev).get(hz.write.param or "", name)},
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
                related=_read_related(hz),
            )


class _KernelRmwRule(Rule):
    """Shared detector for WF106/WF107: a kernel that reads then overwrites its own argument."""

    struct_fields: bool = False

    def check(self, project: Project) -> Iterator[Finding]:
        # launches of read-modify-write kernels that overwrite what an earlier op's adjoint needs
        overwriting: dict[tuple[str, str, str], list[Hazard]] = {}
        for hz in hazards_for(project, self.id):
            kd = hz.write.event.kernel
            if kd is not None and hz.write.param is not None:
                overwriting.setdefault((kd.path, kd.name, hz.write.param), []).append(hz)
        for kd in project.kernels:
            sensitive = value_sensitive_params(kd)
            launches: list[Event] | None = None
            for param, spans in rmw_params(kd).items():
                if ("." in param) != self.struct_fields:
                    continue
                hazards = overwriting.get((kd.path, kd.name, param), [])
                if param not in sensitive and not hazards:
                    continue  # a linear in-place update nobody needs the old value of
                if launches is None:
                    launches = _kernel_launches(project, kd)
                if launches:
                    yield self._report(kd, param, spans[0], launches, hazards)

    def _report(
        self, kd: KernelDef, param: str, span: Span, launches: list[Event], hazards: list[Hazard]
    ) -> Finding:
        if self.struct_fields:
            what = f"kernel `{kd.name}` reads struct field `{param}` and then overwrites the same element"
        else:
            what = f"kernel `{kd.name}` reads `{param}` and then overwrites the same element"
        lines = ", ".join(str(ev.span.line) for ev in launches)
        if hazards:
            why = f"; it also overwrites what {hazards[0].read.describe()} read"
        else:
            why = ""
        related = tuple((ev.span, f"`{kd.name}` launched here on a tape") for ev in launches)
        if hazards:
            related += _read_related(hazards[0])
        return self.finding(
            span,
            f"{what}, and is launched on a tape (line {lines}){why}; the adjoint replays against the overwritten "
            "values. Write to a separate output argument instead",
            data={"kernel": kd.name, "param": param},
            related=related,
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
            "overwrites the same element: `x[i] = f(x[i])`, or a clamp `if x[i] > c: x[i] = c`, when the old "
            "value matters to an adjoint: `f` is non-linear or a branch tests it, or an earlier recorded op's "
            "adjoint needs the values the launch overwrites. A linear in-place update that nothing else read "
            "(`x[i] = x[i] + dt * v[i]`) keeps correct gradients and is not reported."
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
        Example(
            """
import warp as wp


@wp.kernel
def drift(q: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    q[i] = q[i] + dt * v[i]


@wp.kernel
def loss_kernel(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


q = wp.ones(16, dtype=float, requires_grad=True)
v = wp.ones(16, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(drift, dim=16, inputs=[q, v, 0.1])
    wp.launch(loss_kernel, dim=16, inputs=[q], outputs=[loss])
tape.backward(loss)
""",
            note="a linear in-place update that no earlier op read: the adjoint does not need the old value",
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
                data={"kernel": ev.kernel.name if ev.kernel else "", "param": hz.write.param or ""},
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
                    if unresolved_element(buf):
                        continue
                    for reads in live.values():
                        earlier = reads.get(buf.root().id)
                        if earlier is None or earlier.buffer.id == buf.id or earlier.event is ev:
                            continue
                        if buf.view_of is None and earlier.buffer.view_of is None:
                            continue
                        yield self._report(ev, buf, earlier)
                        break
                if ev.recorded:
                    for buf, param in event_sensitive_reads(ev):
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
            data={"view": name} if view is buf else {},
            related=tuple(related),
        )
