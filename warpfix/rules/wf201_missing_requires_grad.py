"""WF201 missing-requires-grad: an intermediate created with `wp.zeros/empty/full/array(...)` (default
`requires_grad=False`) is written by a recorded op whose inputs need gradients and read by a later
recorded op: everything upstream silently gets zero gradient. `*_like` and `clone` inherit the flag
— follow it."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from warpfix.finding import Finding, FixSafety, Severity, not_automatic
from warpfix.model import Project
from warpfix.model.facts import Buffer, Event, Trace, exclusive
from warpfix.model.reach import compiles_no_adjoint
from warpfix.model.tapeflow import (
    DIFFERENTIABLE,
    integer_param,
    is_integer_dtype,
    line_ref,
    outputs,
    tape_of,
    true_reads,
)
from warpfix.rules.base import Example, Rule, RuleDoc

_FIT = """
import numpy as np
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = k[0] * x[i]


@wp.kernel
def sq_err(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


n = 64
x = wp.array(np.linspace(0.0, 1.0, n), dtype=float)
target = wp.array(3.0 * np.linspace(0.0, 1.0, n), dtype=float)
k = wp.array([1.0], dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""


def _alloc_events(trace: Trace) -> dict[int, Event]:
    return {ev.writes[0].id: ev for ev in trace.events if ev.kind in ("alloc", "clone") and ev.writes}


def _alloc_is_integer(alloc: Event | None) -> bool:
    if alloc is None or not isinstance(alloc.node, ast.Call):
        return False
    dtype = next((kw.value for kw in alloc.node.keywords if kw.arg == "dtype"), None)
    return dtype is not None and is_integer_dtype(dtype)


def _flag_from_caller(alloc: Event | None) -> str | None:
    """The text of a ``requires_grad=`` that is not a literal (``requires_grad=requires_grad`` in a helper
    whose caller passed ``False``): a literal ``True`` there would change every other caller too."""
    if alloc is None or not isinstance(alloc.node, ast.Call):
        return None
    flag = next((kw.value for kw in alloc.node.keywords if kw.arg == "requires_grad"), None)
    return ast.unparse(flag) if flag is not None and not isinstance(flag, ast.Constant) else None


_STATIC_ALLOCATOR = """

class Trainer:
    def __init__(self):
        self.h = self._buffer(requires_grad=True)
        self.y = wp.zeros(n, dtype=float)  # expect: WF201

    @staticmethod
    def _buffer(requires_grad: bool = False):
        return wp.zeros(n, dtype=float, requires_grad=requires_grad)

    def step(self):
        with wp.Tape() as tape:
            wp.launch(scale, dim=n, inputs=[x, k], outputs=[self.h])
            wp.launch(scale, dim=n, inputs=[self.h, k], outputs=[self.y])
            wp.launch(sq_err, dim=n, inputs=[self.y, target], outputs=[loss])
        tape.backward(loss)
"""


class MissingRequiresGrad(Rule):
    id = "WF201"
    name = "missing-requires-grad"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "allocate the intermediate with `requires_grad=True`"
    doc = RuleDoc(
        what=(
            "Flags an intermediate array allocated without `requires_grad=True` (`wp.zeros`, `wp.empty`, "
            "`wp.full`, `wp.array`, or a `*_like`/`clone` of such an array, which inherits the flag) that a "
            "recorded op writes from inputs that need gradients and a later recorded op reads on the way "
            "to the loss."
        ),
        why=(
            "An array without a `.grad` buffer is a dead end for the adjoint: backward finds no gradient to "
            "propagate through it, so everything upstream (the parameters) silently gets zero gradient. "
            "Nothing warns; training just does not move."
        ),
        example=_FIT
        + """
y = wp.zeros(n, dtype=float)  # no requires_grad: the chain k -> y -> loss is cut
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)  # k.grad == 0
""",
        use_instead="y = wp.zeros(n, dtype=float, requires_grad=True)",
        fix="Safe: adding `requires_grad=True` allocates a gradient buffer; forward values are unchanged.",
        versions="All supported Warp versions: `wp.zeros/empty/full/array` default to `requires_grad=False`.",
    )
    VALID = [
        Example(
            _FIT
            + """
y = wp.zeros(n, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            note="every intermediate on the chain has a gradient; x and target are read-only constants",
        ),
        Example(
            """
import numpy as np
import warp as wp


@wp.kernel
def bin_particles(q: wp.array(dtype=wp.vec3), cell: wp.array(dtype=int)):
    i = wp.tid()
    cell[i] = int(q[i][0] * 4.0)


@wp.kernel
def cell_energy(q: wp.array(dtype=wp.vec3), cell: wp.array(dtype=int), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, float(cell[i]) * wp.length_sq(q[i]))


n = 32
q = wp.array(np.random.rand(n, 3), dtype=wp.vec3, requires_grad=True)
cell = wp.zeros(n, dtype=int)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(bin_particles, dim=n, inputs=[q], outputs=[cell])
    wp.launch(cell_energy, dim=n, inputs=[q, cell], outputs=[loss])
tape.backward(loss)
""",
            note="integer arrays carry no gradient",
        ),
        Example(
            _FIT
            + """
weights = wp.zeros(n, dtype=float)
y = wp.zeros(n, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, x], outputs=[weights])
    wp.launch(scale, dim=n, inputs=[weights, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            note="the producer of `weights` reads nothing that needs a gradient",
        ),
        Example(
            _FIT
            + """


@wp.kernel(enable_backward=False)
def snap(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.floor(x[i] * k[0])


y = wp.zeros(n, dtype=float)
tape = wp.Tape()
with tape:
    wp.launch(snap, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            note="`snap` compiles no backward: the chain is cut on purpose, `requires_grad` on `y` would "
            "change nothing (a taped kernel without backward is WF202's finding)",
        ),
        Example(
            _FIT
            + """
INDEX = wp.int32


@wp.kernel
def bucket(x: wp.array[float], k: wp.array[float], cell: wp.array[wp.int32]):
    i = wp.tid()
    cell[i] = wp.int32(k[0] * x[i] * 10.0)


@wp.kernel
def gather(x: wp.array[float], cell: wp.array[wp.int32], y: wp.array[float]):
    i = wp.tid()
    y[i] = x[i] * float(cell[i])


cell = wp.zeros(n, dtype=INDEX)
y = wp.zeros(n, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(bucket, dim=n, inputs=[x, k], outputs=[cell])
    wp.launch(gather, dim=n, inputs=[x, cell], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            note="`cell` is an integer array (the kernel's `wp.array[wp.int32]` says so where the allocation's "
            "dtype is a name): integers carry no gradient, there is no chain to cut",
        ),
    ]
    INVALID = [
        Example(
            _FIT
            + """
y = wp.zeros(n, dtype=float)  # expect: WF201
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            expected_fix=_FIT
            + """
y = wp.zeros(n, dtype=float, requires_grad=True)  # expect: WF201
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
        ),
        Example(
            _FIT
            + """
y = wp.empty_like(x)  # expect: WF201
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            expected_fix=_FIT
            + """
y = wp.empty_like(x, requires_grad=True)  # expect: WF201
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            note="`empty_like` inherits requires_grad=False from the constant x",
        ),
        Example(
            _FIT + _STATIC_ALLOCATOR,
            expected_fix=_FIT + _STATIC_ALLOCATOR.replace(
                "self.y = wp.zeros(n, dtype=float)", "self.y = wp.zeros(n, dtype=float, requires_grad=True)"),
            note="`self._buffer(...)` calls a @staticmethod: `requires_grad=True` reaches its parameter, so `h` "
            "carries a gradient and `y`, written from it, cuts the chain",
        ),
        Example(
            _FIT
            + """

def buffer(requires_grad: bool = False):
    return wp.zeros(n, dtype=float, requires_grad=requires_grad)  # expect: WF201


y = buffer()
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            note="the flag is the caller's: `requires_grad=True` in `buffer` would change its other callers, so "
            "the fix (`buffer(requires_grad=True)` here) is not automatic",
        ),
    ]

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        events = trace.events
        allocs = _alloc_events(trace)
        # Buffers that carry a gradient, or would if their allocation asked for one.
        carrying: set[int] = set()
        candidates: dict[int, tuple[int, Buffer]] = {}  # buffer id -> (index of the writer, buffer)
        def no_adjoint(ev: Event) -> bool:
            """A kernel compiled without backward code: no gradient flows through it, with or without
            ``requires_grad`` on what it writes (WF202's finding where that is a bug)."""
            return ev.kernel is not None and compiles_no_adjoint(project, ev.kernel)

        for idx, ev in enumerate(events):
            if not ev.recorded or ev.kind not in DIFFERENTIABLE or no_adjoint(ev):
                continue
            if not any(b.root().requires_grad or b.root().id in carrying for b in true_reads(ev)):
                continue
            for out in outputs(ev):
                buf = out.root()
                if buf.requires_grad is True:
                    carrying.add(buf.id)
                    continue
                if buf.requires_grad is not False or not buf.fresh or buf.origin is None:
                    continue
                if integer_param(ev, out) or _alloc_is_integer(allocs.get(buf.id)):
                    continue
                carrying.add(buf.id)
                candidates.setdefault(buf.id, (idx, buf))
        for idx, buf in candidates.values():
            hit = self._reaches_loss(events, idx, buf, no_adjoint)
            if hit is None:
                continue
            writer, reader, sink = events[idx], hit[0], hit[1]
            chosen = _flag_from_caller(allocs.get(buf.id))
            refusal = f"`requires_grad={chosen}` is the caller's choice: pass `True` where it is called" \
                if chosen is not None else None
            yield self.finding(
                buf.origin,  # type: ignore[arg-type]
                f"`{writer.name_of(buf)}` is allocated without `requires_grad=True` but is written from "
                f"differentiable inputs by {self._what(writer)} ({line_ref(writer.span, buf.origin)}) and read "  # type: ignore[arg-type]
                f"by {self._what(reader)} ({line_ref(reader.span, buf.origin)}) on the way to "  # type: ignore[arg-type]
                f"`{sink}`: backward stops here and everything upstream gets zero gradient",
                related=((writer.span, "written here"), (reader.span, "read here")),
                fix_safety=FixSafety.NONE if refusal else None,
                fix_description=not_automatic(self.fix_description, refusal) if refusal else None,
                data={"no_edit": refusal} if refusal else None,
            )

    @staticmethod
    def _what(ev: Event) -> str:
        if ev.kind == "launch":
            return f"`{ev.kernel.name if ev.kernel else ev.detail.get('kernel', '?')}`"
        return f"`wp.{ev.kind}`"

    @staticmethod
    def _reaches_loss(events: list[Event], start: int, buf: Buffer,
                      no_adjoint: Callable[[Event], bool]) -> tuple[Event, str] | None:
        """The first recorded reader of ``buf`` after ``events[start]`` from which data flows (on the
        tape) into an array with a gradient that a later backward of the same tape differentiates, and
        the name of that array (the backward's loss when the flow reaches it)."""
        writer = events[start]
        tape = tape_of(writer)
        losses = {
            b.root().id
            for e in events[start + 1 :]
            if e.kind == "backward" and e.tape == tape
            for b in e.reads
        }
        if not any(e.kind == "backward" and e.tape == tape for e in events[start + 1 :]):
            return None
        tainted = {buf.id}
        first_reader: Event | None = None
        sink: str | None = None
        for ev in events[start + 1 :]:
            if tape_of(ev) != tape or ev.kind not in DIFFERENTIABLE or exclusive(ev, writer) or no_adjoint(ev):
                continue
            if not any(b.root().id in tainted for b in true_reads(ev)):
                continue
            first_reader = first_reader or ev
            for out in outputs(ev):
                root = out.root()
                if root.id in losses:
                    return first_reader, ev.name_of(out)
                if root.requires_grad is True and sink is None:
                    sink = ev.name_of(out)
                tainted.add(root.id)
        return (first_reader, sink) if first_reader is not None and sink is not None else None
