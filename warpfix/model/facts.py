"""The static facts about a Warp program that every rule reads.

Two layers:

* **Kernel facts** (:class:`KernelDef`): for each ``@wp.kernel`` / ``@wp.func`` /
  ``@wp.func_grad`` / ``@wp.func_replay`` / ``@wp.func_native`` / ``@wp.struct``, every
  parameter (and struct field) with each access to it: read, write, read-then-written at
  the same index, in-place ``*=``/``/=``, accumulation (``+=``, atomics), and the loop
  (static or dynamic trip count) it sits in. Effects of ``@wp.func`` calls are folded into
  the caller's parameters.
* **Host traces** (:class:`Trace`): an abstract interpretation of host code. Each root
  (module body, or a function that no other project function calls) is executed
  symbolically: names, attributes and list elements are bound to abstract
  :class:`Buffer` objects (a fresh one per allocation), project functions and methods
  are inlined with their arguments bound, loops are unrolled three times (so what iteration
  N+1 does to what iteration N read is visible), and every operation on arrays becomes an
  :class:`Event` in program order, tagged with the tape scopes that record it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from warpfix.finding import Span

if TYPE_CHECKING:
    from warpfix.model.source import SourceFile

AccessKind = Literal["read", "write", "rmw", "inplace_mul", "accum", "atomic", "tile_store"]
LoopKind = Literal["static", "dynamic"]


@dataclass(frozen=True, slots=True)
class Access:
    """One access to an array parameter inside a kernel/func body."""

    kind: AccessKind
    span: Span
    index: str  # the index expression as written ("i", "tid, j"); "" for whole-array use
    loops: tuple[LoopKind, ...] = ()  # enclosing loops, outermost first
    via: str | None = None  # name of the @wp.func through which the access happens

    def __reduce__(self) -> tuple:
        # a slotted dataclass pickles through dataclasses.fields() per object (file summaries cache many)
        return Access, (self.kind, self.span, self.index, self.loops, self.via)


@dataclass(slots=True)
class ParamFacts:
    name: str  # parameter name, or "param.field" for a struct field accessed through a parameter
    annotation: str  # annotation source text ("wp.array(dtype=wp.vec3)")
    is_array: bool
    is_struct: bool = False
    accesses: list[Access] = field(default_factory=list)  # only ever appended to
    # the kinds among ``accesses`` and how many accesses they were taken from (asked millions of times)
    _kinds: tuple[int, frozenset[str]] = field(default=(0, frozenset()), repr=False, compare=False)

    def has(self, *kinds: AccessKind) -> bool:
        seen, found = self._kinds
        if seen != len(self.accesses):
            found = frozenset(a.kind for a in self.accesses)
            self._kinds = (len(self.accesses), found)
        return not found.isdisjoint(kinds)

    @property
    def read(self) -> bool:
        return self.has("read", "rmw", "inplace_mul", "accum", "atomic")

    @property
    def written(self) -> bool:
        """Overwritten (``=``, ``wp.tile_store``), not merely accumulated into."""
        return self.has("write", "rmw", "inplace_mul", "tile_store")

    @property
    def accumulated(self) -> bool:
        return self.has("accum", "atomic")

    @property
    def modified(self) -> bool:
        return self.written or self.accumulated


KernelKind = Literal["kernel", "func", "func_grad", "func_replay", "func_native", "struct"]


@dataclass
class KernelDef:
    name: str
    kind: KernelKind
    path: str
    span: Span  # the def/class line
    _node: ast.FunctionDef | ast.ClassDef | None
    params: dict[str, ParamFacts]  # ordered as declared; struct fields appear as "p.field"
    options: dict[str, object] = field(default_factory=dict)  # decorator kwargs (enable_backward=...)
    target: str | None = None  # func_grad/func_replay: the name of the func it customises
    struct_fields: dict[str, str] = field(default_factory=dict)  # @wp.struct: field -> annotation
    # calls to non-warp functions in the body: (callee name, each argument's name if it is a plain
    # name, enclosing loops)
    calls: list[tuple[str, list[str | None], tuple[LoopKind, ...]]] = field(default_factory=list)
    # the file it is defined in: its node is found there again after the file's tree was released
    source: SourceFile | None = field(default=None, repr=False, compare=False)
    key: tuple[int, int] = (0, 0)  # line and column of the def/class (set from the node)
    lines: tuple[int, int] = (0, 0)  # first line (decorators included) and last line of the definition
    is_function: bool = True  # a def (not a @wp.struct class)
    backward_option: Span | None = None  # the decorator that passes ``enable_backward=...``

    def __post_init__(self) -> None:
        node = self._node
        if node is not None:
            self.key = (node.lineno, node.col_offset)
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            self.lines = (start, getattr(node, "end_lineno", None) or node.lineno)
            self.is_function = isinstance(node, ast.FunctionDef)

    @property
    def node(self) -> ast.FunctionDef | ast.ClassDef:
        """The definition's node (parsed again from its file when its tree was released)."""
        if self._node is None:
            assert self.source is not None
            self._node = self.source.definition_at(*self.key)  # type: ignore[assignment]
        return self._node  # type: ignore[return-value]

    def release_node(self) -> None:
        """Forget the node (its file's tree is being released); :attr:`node` finds it again."""
        if self.source is not None:
            self._node = None

    def defined_at(self, node: ast.AST) -> bool:
        """Whether ``node`` (of the definition's file) is the definition."""
        return (getattr(node, "lineno", None), getattr(node, "col_offset", None)) == self.key

    @property
    def positional(self) -> list[str]:
        """Parameter names in launch order (struct fields excluded)."""
        return [p for p in self.params if "." not in p]


@dataclass
class Buffer:
    """An abstract array (or array-holding object) on the host."""

    id: int
    label: str  # the expression that first named it ("state.particle_q", "forces")
    origin: Span | None = None  # allocation site, None when it came from outside (unknown)
    alloc: str | None = None  # "zeros", "empty", "full", "array", "clone", "zeros_like", ...
    requires_grad: bool | None = None  # None: unknown (parameter, opaque call)
    requires_grad_explicit: bool = False  # requires_grad= given at the allocation
    retain_grad: Span | None = None
    view_of: Buffer | None = None  # ptr= / zero-copy view of another buffer
    grad_of: Buffer | None = None  # this buffer is ``x.grad`` of that one
    fresh: bool = False  # created by an allocation or clone seen in the project

    def root(self) -> Buffer:
        b = self
        while b.view_of is not None:
            b = b.view_of
        return b


@dataclass(frozen=True)
class TapeScope:
    """One execution of a ``with tape:`` block (each unrolled loop iteration is a new one)."""

    tape: int  # id of the tape object
    instance: int  # unique per execution of the with-block
    span: Span  # the with statement


EventKind = Literal[
    "launch",  # wp.launch of a project kernel (kernel is set) or an unknown kernel (kernel None); also each
    # launch a library call makes (kernel: the library's KernelDef; detail: "library", "lib_call" (one id per
    # call), "param_paths" / "param_text" (kernel parameter -> path from the library function's parameters /
    # the caller's expression for it))
    "copy",  # wp.copy(dst, src)
    "clone",  # x = wp.clone(src)  (writes the fresh buffer, reads src)
    "assign",  # dst.assign(src)
    "zero",  # x.zero_()
    "fill",  # x.fill_(v)
    "alloc",  # an allocation (writes the fresh buffer)
    "rebind",  # a name/attribute/element rebound to an existing buffer (not a fresh allocation)
    "swap",  # a, b = b, a  (tuple rebinding of existing buffers)
    "tape_begin",
    "tape_end",
    "backward",  # tape.backward(loss=...) / tape.backward(grads=...)
    "tape_zero",
    "tape_reset",
    "grad_read",  # x.grad used (read) on the host
    "grad_zero",  # x.grad.zero_() / x.grad.fill_(...) / x.grad.assign(...)
    "host_write",  # in-place numpy write through x.numpy()[...] = ..., or a call known to mutate
    "retain_grad",  # x.retain_grad = True
    "call",  # a call to a non-project function that receives buffers (may read or write them)
    "field_set",  # s.field = value on a @wp.struct instance (reads: the struct, writes: the new field value)
    "capture_launch",  # wp.capture_launch(g) of a graph whose captured body (not run by the model) backs off a tape
    "record_func",  # tape.record_func(backward, arrays=[...]): a host step with a hand-written adjoint (reads: arrays)
]


@dataclass
class Event:
    kind: EventKind
    span: Span  # the statement/call in user code where it happens
    node: ast.AST
    reads: list[Buffer] = field(default_factory=list)
    writes: list[Buffer] = field(default_factory=list)  # overwritten (=, copy, zero_, fill_, alloc)
    accums: list[Buffer] = field(default_factory=list)  # accumulated into (+=, atomic_add)
    # per-buffer expression text as written at this site (for messages/codemods)
    names: dict[int, str] = field(default_factory=dict)
    tapes: tuple[TapeScope, ...] = ()  # recording scopes active here (usually 0 or 1)
    # (loop id, unrolled pass), outermost first. Unknown trip counts run passes 0, 1 and 2; a known
    # count n runs every iteration up to 4, else iterations 0, 1, 2 and n - 1 as passes 0 to 3 (an
    # ``xs[t % k]`` in the body makes that k + 1 consecutive iterations, k <= 4).
    loops: tuple[tuple[int, int], ...] = ()
    call_stack: tuple[Span, ...] = ()  # project call sites leading here, outermost first
    kernel: KernelDef | None = None  # launch
    binding: dict[str, Buffer] = field(default_factory=dict)  # launch: kernel param -> buffer
    arg_nodes: dict[str, ast.expr] = field(default_factory=dict)  # launch: kernel param -> arg expr
    tape: int | None = None  # tape_begin/end/backward/zero/reset: which tape
    scope: TapeScope | None = None  # tape_begin/tape_end: the scope
    detail: dict[str, object] = field(default_factory=dict)
    # (if-statement id, arm) for every enclosing if: events in different arms of one if never
    # both run; see :func:`exclusive`.
    branches: tuple[tuple[int, int], ...] = ()

    @property
    def recorded(self) -> bool:
        return bool(self.tapes)

    def name_of(self, buf: Buffer) -> str:
        return self.names.get(buf.id, buf.label)


@dataclass(frozen=True)
class Loop:
    id: int
    span: Span
    node: ast.For | ast.While
    var: str | None  # the for-loop target name
    contains_backward: bool  # statically: a .backward( call inside (directly or via calls)
    contains_tape: bool  # statically: a with-tape inside


@dataclass
class Trace:
    """The events of one root, in program order (loops unrolled)."""

    root: str  # "main.py:<module>" or "main.py:train"
    path: str
    events: list[Event]
    loops: dict[int, Loop]
    # analyses of this trace that several rules read (its hazards), computed once, dropped with it
    memo: dict[str, object] = field(default_factory=dict, repr=False, compare=False)


def exclusive(a: Event, b: Event) -> bool:
    """True when ``a`` and ``b`` sit in different arms of the same ``if`` (never both run)."""
    arms = dict(a.branches)
    return any(arms.get(if_id, arm) != arm for if_id, arm in b.branches)
