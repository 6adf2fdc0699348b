"""The abstract values the host interpreter computes with, its frames and its control-flow signals."""

from __future__ import annotations

import ast
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


#: The label of a dict display whose keys are all literals: its items are its entries, in order, so
#: ``d.keys()``, ``d.values()``, ``d.items()`` and ``for k in d`` are lists of known length.
DICT = "{dict}"


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
