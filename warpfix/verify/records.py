"""What the verify probe records of a program's window: arrays, operations, graph captures, and
what a backward's FD comparison needs (part of the probe package: relative imports, warp and numpy only)."""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: how the probe's error begins when every backward ran but none read a leaf parameter (a tape made per
#: frame whose last recording reads none): the acceptance reads it as "FD could not judge"
NO_LEAF_ERROR = "no backward had a leaf parameter to compare"


@dataclass(eq=False)
class ArrayInfo:
    """What the probe knows about one array touched in the window."""

    arr: Any
    order: int
    snap: Any
    name: str
    hash: int
    first_read: int | None = None
    taped_write: bool = False
    written_after_read: bool = False
    writes_at: list[int] = field(default_factory=list)  # op indices that wrote it
    tainted: bool = False
    is_grad: bool = False
    span: tuple[Any, int, int] | None = None  # memory range, to find writes through aliases
    label: str = ""  # the kernel argument (or struct field) it was first passed as
    trained: bool = False  # written from gradient data (an optimizer step) after a backward
    # op index before which replays put back ``snap``: the array came into the window over memory the
    # program had changed outside the trace since the window last saw it (a pooled buffer lent again)
    reset_at: int | None = None


@dataclass(eq=False)
class Op:
    """One recorded operation of the window."""

    index: int
    kind: str  # "launch", "copy", "assign", "fill", "zero"
    label: str  # e.g. "launch of kernel integrate"
    path: str
    line: int
    tape: Any
    replay: Callable[[], None]
    reads: list[ArrayInfo]
    writes: list[ArrayInfo]
    read_hash: dict[int, int] = field(default_factory=dict)  # info.order -> content hash when read
    # info.order -> (argument position or None in a struct, may read, declared write) of each use in this op
    positions: dict[int, list[tuple[int | None, bool, bool]]] = field(default_factory=dict)
    library: str | None = None  # "path:line" of the library call that made it, when not the program
    replayed: bool = False  # a replay of a captured graph
    recording: Any = None  # the tape recording when the operation ran (a fill is never recorded, but may run inside one)
    slabs: dict[int, int] = field(default_factory=dict)  # argument position -> the slab a launch touches there
    slab_hash: dict[int, tuple[int, int]] = field(default_factory=dict)  # info.order -> (slab read, its hash)


@dataclass(eq=False)
class ProbeGraph:
    """What ``capture_end`` returns under the probe: the captured operations, as calls back into the
    probe's hooks with their arguments frozen at capture time (what a graph replays)."""

    site: str
    events: list[Callable[[], Any]] = field(default_factory=list)
    launches: int = 0
    saved: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # id -> (array, contents before capture)


@dataclass
class ReplayPlan:
    """What every FD replay of one backward does: the operations, what to restore, where leaves are read."""

    n_ops: int
    restore: list[ArrayInfo]
    leaves_at: dict[int, list[ArrayInfo]]  # op index -> leaves first read there
    start: int = 0  # the first operation replayed: where the window's first tape began recording
    start_state: dict[int, Any] = field(default_factory=dict)  # info.order -> contents at ``start``
    resets: dict[int, list[ArrayInfo]] = field(default_factory=dict)  # op index -> arrays put back there
    copies: list[tuple[Any, Any, int | None]] | None = None  # how ``restore`` is put back (FiniteDifferences)


@dataclass
class BackwardRecord:
    """The verdicts of a compared backward, kept to recognise cross-window mismatches."""

    params: dict[int, str]  # info.order -> verdict


@dataclass
class Objective:
    """The scalar a backward differentiates: sum(seed * array) over its seeds (a loss: seed 1)."""

    seeds: list[tuple[Any, np.ndarray]]
    how: str  # "loss", or how the seeds were given

    def value(self) -> float:
        return float(sum(float(np.dot(seed, flat(arr.numpy()))) for arr, seed in self.seeds))

    def ulp(self, wp: Any) -> float:
        """The rounding resolution of the objective: seed-weighted ulp of every seeded value."""
        total = 0.0
        for arr, seed in self.seeds:
            dtype = np.float64 if wp._src.types.type_scalar_type(arr.dtype) == wp.float64 else np.float32
            vals = np.abs(flat(arr.numpy())).astype(dtype)
            total += float(np.sum(np.abs(seed) * np.spacing(vals).astype(np.float64)))
        return total


@dataclass
class PendingCompare:
    """A backward whose FD comparison waits until the program shows which parameters it trains."""

    entry: dict[str, Any]
    objective: Objective
    leaves: list[ArrayInfo]
    ad: dict[int, np.ndarray]
    path: str
    line: int
    plan: ReplayPlan
    infos: list[ArrayInfo]
    records: list[BackwardRecord]  # the window's backwards, in order
    record: BackwardRecord
    notes: dict[int, str]  # id(info) -> note on that leaf
    integrity: list[dict[str, Any]] = field(default_factory=list)  # WF902 findings raised at this backward
    tape: Any = None  # the tape backwarded
    tape_reads: dict[int, int] = field(default_factory=dict)  # info.order -> first op index this tape read it at


def family(name: str) -> str:
    """The array family of a name: list indices dropped (``states[3].q`` -> ``states[].q``)."""
    return re.sub(r"\[[^\]]*\]", "[]", name)


def digest(arr: Any) -> int:
    data = np.ascontiguousarray(arr.numpy())
    return zlib.crc32(data.view(np.uint8).reshape(-1))


def flat(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1)
