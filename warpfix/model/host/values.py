"""The abstract values the host interpreter computes with, its frames and its control-flow signals."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from warpfix.model.facts import Buffer, Event, KernelDef
from warpfix.model.source import SourceFile


@dataclass(eq=False, slots=True)
class Val:
    """One abstract value (slotted, and its rarely filled sets and lists immutable and shared: a check
    creates millions of them)."""

    id: int
    label: str
    kind: str = "unknown"  # unknown | array | object | list | tape | kernel | func | class | module | int | const
    buf: Buffer | None = None
    attrs: dict[str, Val] = field(default_factory=dict)
    items: dict[str, Val] = field(default_factory=dict)
    kernel: KernelDef | None = None
    func: tuple[SourceFile, ast.FunctionDef] | None = None
    cls: tuple[SourceFile, ast.ClassDef] | None = None
    module: SourceFile | None = None
    value: object = None  # int/const payload
    tape: int | None = None
    factory: tuple[ast.expr, dict[str, Val], SourceFile] | None = None  # lazy list elements
    factory_var: str | None = None  # ``[f(i) for i in range(n)]``: the name bound to each element's index
    fresh: bool = False  # produced by an allocation / constructor seen in the project
    length: int | None = None  # lists whose length is known (literals, appends, range(N) comprehensions)
    is_struct: bool = False  # an instance of a project @wp.struct
    lib_cls: tuple[SourceFile, ast.ClassDef] | None = None  # an instance of an installed library's class
    external: bool = False  # returned by a library call: never guessed to be a project object
    bound_attrs: frozenset[str] = frozenset()  # library object: attributes its constructor bound
    # made by a library call given ``requires_grad=True`` (``builder.finalize(requires_grad=True)``), or
    # by a method of such an object (``model.state()``): its arrays carry gradients
    grad_enabled: bool = False
    aliased_by: tuple[Event, ...] = ()  # ``[x] * n`` rebind events that cover this value
    # a function defined in another function: the enclosing frames' locals, innermost first (read by
    # reference, as Python's closures read the enclosing scope's later bindings too)
    closure: tuple[dict[str, Val], ...] = ()


#: The label of a dict display whose keys are all literals: its items are its entries, in order, so
#: ``d.keys()``, ``d.values()``, ``d.items()`` and ``for k in d`` are lists of known length.
DICT = "{dict}"


MAX_VALUE_SET = 4096  # a value that varies with a loop's counter is listed over its iterations up to this many


class Varies:
    """How a known int, or a test's truth, varies between the passes of an unrolled loop that runs only
    some of its iterations, as a function of that loop's counter (see ``HostInterpreter.varying``):
    ``base`` names the run of the loop, ``sampled`` holds the value at each pass the loop runs, and
    :meth:`every` the value at every iteration the loop has (None when not known, or too many). A
    ``base`` of None: it varies, nothing is known of how (``t += 1`` in a loop; two loops' counters)."""

    __slots__ = ("base", "sampled", "_every", "_make")

    def __init__(self, base: int | None, sampled: tuple = (), every: Sequence | None = None,
                 make: Callable[[], Sequence | None] | None = None) -> None:
        self.base, self.sampled, self._every, self._make = base, sampled, every, make

    def every(self) -> Sequence | None:
        if self._make is not None:  # listed when a test first needs it
            make, self._make = self._make, None
            self._every = make()
        return self._every


UNKNOWN_VARIES = Varies(None)


def combine(fn: Callable, now: list, varies: list[Varies | None]) -> Varies | None:
    """How ``fn(*operands)`` varies, the operands' values now being ``now`` and ``varies[i]`` saying how
    operand ``i`` varies (None: it does not); None when no operand varies."""
    moving = [v for v in varies if v is not None]
    if not moving:
        return None
    base = moving[0].base
    if base is None or any(v.base != base for v in moving):
        return UNKNOWN_VARIES

    def apply(columns: list[Sequence | None], k: int) -> object:
        try:
            return fn(*[c[k] if c is not None else x for c, x in zip(columns, now, strict=True)])
        except (ArithmeticError, ValueError, TypeError):
            return None

    columns = [v.sampled if v is not None else None for v in varies]
    sampled = tuple(apply(columns, k) for k in range(len(moving[0].sampled)))
    if any(x is None for x in sampled):
        return UNKNOWN_VARIES

    def make() -> tuple | None:
        every = [v.every() if v is not None else None for v in varies]
        if any(e is None for v, e in zip(varies, every, strict=True) if v is not None):
            return None
        n = len(next(e for e in every if e is not None))  # type: ignore[arg-type]
        if n > MAX_VALUE_SET:
            return None
        out = tuple(apply(every, k) for k in range(n))
        return None if any(x is None for x in out) else out

    return Varies(base, sampled, make=make)


def decided(now: bool, varies: Varies | None) -> bool | None:
    """A test's truth ``now``, when every outcome it has over all the iterations of the loop it varies
    with is one it has at some pass the loop runs (so deciding it never hides an arm); else None."""
    if varies is None:
        return now
    if varies.base is None:
        return None
    seen = set(varies.sampled)
    if len(seen) > 1:
        return now
    every = varies.every()
    return now if every is not None and set(every) <= seen else None


class _Return(Exception):
    pass


class _Budget(Exception):
    pass


class _CallBudget(Exception):
    """An inlined call ran past its own statement budget."""


@dataclass
class _Frame:
    src: SourceFile
    locals: dict[str, Val]
    self_val: Val | None = None
    returned: Val | None = None
    fn: ast.FunctionDef | None = None  # the function being run (``super()`` starts above its class)
    closure: tuple[dict[str, Val], ...] = ()  # the enclosing functions' locals (a nested function's frame)

    def lookup(self, name: str) -> Val | None:
        """A local of this frame, else of an enclosing function (a closure's free variable)."""
        v = self.locals.get(name)
        if v is None:
            for scope in self.closure:
                v = scope.get(name)
                if v is not None:
                    break
        return v



class _SameItem(dict):
    """Items of ``[x] * n``: every index is the same object until one is rebound."""

    def __init__(self, only: Val) -> None:
        super().__init__()
        self.only = only

    def get(self, key, default=None):  # type: ignore[override]
        return super().get(key, self.only)

    def __getitem__(self, key):  # type: ignore[override]
        return super().get(key, self.only)



def _normalise_index(obj: Val, key: str) -> str:
    """``xs[-k]`` is ``xs[len(xs) - k]`` when the list's length is known."""
    if obj.length is not None and key.startswith("-") and key[1:].isdigit() and 0 < int(key[1:]) <= obj.length:
        return str(obj.length - int(key[1:]))
    return key


def _holds_array(v: Val) -> bool:
    """An array, or a list/tuple holding one (an optimizer's ``step([x.grad])``)."""
    if v.buf is not None:
        return True
    return v.kind == "list" and any(item.buf is not None for item in dict(v.items).values())
