"""Runtime WF201: a gradient chain cut by an array without ``requires_grad`` (part of the probe package:
relative imports only, warp and numpy).

At each backward the probe hands over the operations its tape recorded (and the operations that ran
while it recorded: a ``wp.copy`` into an array without a gradient is not put on the tape at all). A
chain is cut at an array when

* a recorded operation wrote it from values that depend on a leaf parameter (transitively, through
  the tape's operations in order, and through the custom adjoints ``tape.record_func`` records: warp.fem
  takes the tape off around some of its own kernels and records their adjoints so),
* a later recorded operation read it on the way to the backward's objective (backwards through the
  same operations; the arrays of a custom adjoint are taken as connected to each other), and
* it has no gradient when the backward starts: the backward stops there, and everything upstream
  misses that part of its gradient.

Only float arrays the program allocated itself, with a direct ``wp.zeros/empty/array/...`` call, are
reported, at that call: that is the line the WF201 fix edits. Arrays are followed by the memory they span (warp.fem
writes its outputs through views of the program's arrays). Arrays a library allocates (warp.fem's
temporaries) are the library's design; integer arrays and zero-size ones carry no gradient.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .spans import SpanIndex, mem_range, overlap

#: The outermost Warp function of a direct allocation by the program (``__init__``: ``wp.array(...)``).
ALLOCATORS = frozenset({
    "zeros", "empty", "full", "ones", "zeros_like", "empty_like", "full_like", "ones_like", "clone", "__init__",
})
#: Attribute the probe sets on an array the program allocated: (path, line) of the allocation.
SITE_ATTR = "_warpfix_alloc_site"


class CutChain:
    """Records where the program allocates arrays and the tapes' custom adjoints; finds cut chains."""

    def __init__(self, tracer: Any, warp_dir: str) -> None:
        self.tracer = tracer
        self.warp_dir = warp_dir
        # id(tape) -> (tape, [(window, op index, arrays)]) of its custom adjoints
        self.funcs: dict[int, tuple[Any, list[tuple[int, int, list[Any]]]]] = {}
        self.in_warp: dict[str, bool] = {}  # code filename -> is it Warp's

    def is_warp_file(self, filename: str) -> bool:
        known = self.in_warp.get(filename)
        if known is None:
            known = self.in_warp[filename] = os.path.realpath(filename).startswith(self.warp_dir)
        return known

    def install(self, wp: Any, as_program: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        arr_cls, tape_cls = wp._src.types.array, wp._src.tape.Tape
        orig_init, orig_record = arr_cls.__init__, as_program(tape_cls.record_func)
        shield = self.tracer.shield

        def init(arr: Any, *args: Any, **kwargs: Any) -> None:
            orig_init(arr, *args, **kwargs)
            if self.tracer.enabled and self.tracer.mode != "done":
                try:
                    self.on_alloc(arr, sys._getframe(1))
                except Exception:  # noqa: BLE001 - a site the probe cannot read: the array is not reported
                    pass

        init.__wrapped__ = orig_init  # type: ignore[attr-defined]
        arr_cls.__init__ = init
        tape_cls.record_func = shield(lambda tape, backward, arrays: self.on_record_func(orig_record, tape, backward,
                                                                                          arrays), tape_cls.record_func)

    def on_alloc(self, arr: Any, frame: Any) -> None:
        """Keep the program's line of a direct allocation on the array."""
        outermost = "__init__"
        while frame is not None and self.is_warp_file(frame.f_code.co_filename):
            outermost = frame.f_code.co_name
            frame = frame.f_back
        if frame is None or outermost not in ALLOCATORS:
            return
        filename = frame.f_code.co_filename
        if filename.startswith("<") or not self.tracer.is_program(filename):
            return
        try:
            setattr(arr, SITE_ATTR, (self.tracer.relpath(filename), frame.f_lineno))
        except AttributeError:  # an array type without a __dict__
            pass

    def on_record_func(self, orig: Callable[..., Any], tape: Any, backward: Any, arrays: Any) -> Any:
        result = orig(tape, backward, arrays)
        if self.tracer.tracing():
            held = [a for a in arrays if self.tracer.is_array(a)]
            self.funcs.setdefault(id(tape), (tape, []))[1].append((self.tracer.window, len(self.tracer.ops), held))
        return result

    def check(self, tape: Any, since: int, leaves: Sequence[Any], outputs: Sequence[Any], frame: Any) -> None:
        """Report the arrays that cut the chain from ``leaves`` (ArrayInfo) to ``outputs`` (the backward's
        seeded arrays) on ``tape``'s operations since ``since``."""
        tracer = self.tracer
        steps: list[tuple[float, Any, list[Any], list[Any]]] = [
            (op.index, op, [i.arr for i in op.reads], [i.arr for i in op.writes])
            # recorded operations only: one that runs in the block unrecorded (``record_tape=False``, under a
            # ``record_func`` adjoint) has no backward to cut, with or without requires_grad -- but for a copy
            # Warp left off the tape only because its source has no gradient: that source is where it is cut
            for op in tracer.ops[since:] if op.tape is tape or _cut_copy(op, tape)
        ]  # fmt: skip
        held = self.funcs.get(id(tape))
        if held is not None and held[0] is tape:
            # a custom adjoint recorded after the operations before it: its arrays are connected both ways
            window = tracer.window
            steps += [(at - 0.5, None, arrays, arrays) for w, at, arrays in held[1] if w == window and at >= since]
        steps.sort(key=lambda s: s[0])
        # by memory, not by object: warp.fem writes its outputs through views of the program's arrays
        depends = SpanIndex()  # spans of the values that depend on a leaf -> the leaf's name
        seen: set[int] = set()
        for info in leaves:
            depends.add(mem_range(info.arr), info.name)
        cut: dict[int, tuple[Any, float, Any, str]] = {}  # id -> (array, first dependent write, writer, leaf)
        for at, op, reads, writes in steps:
            names = [name for a in reads for name in depends.overlapping(mem_range(a))]
            if not names:
                continue
            source = min(names, key=lambda n: n.startswith("array#"))  # the program's name for a leaf first
            for arr in writes or _unseen_writes(op, reads):
                if id(arr) not in seen:
                    seen.add(id(arr))
                    depends.add(mem_range(arr), source)
                    if op is not None and self.cuts(arr):
                        cut[id(arr)] = (arr, at, op, source)
        if not cut:
            return
        reaching = SpanIndex()  # spans of the values the objective is computed from
        for arr in outputs:
            reaching.add(mem_range(arr), True)
        readers: list[tuple[float, Any, list[Any]]] = []  # (index, op, reads) of the steps on the way to it
        for at, op, reads, writes in reversed(steps):
            if not any(reaching.any_overlap(mem_range(a)) for a in writes or _unseen_writes(op, reads)):
                continue
            for arr in reads:
                reaching.add(mem_range(arr), True)
            if op is not None:
                readers.append((at, op, reads))
        objective = {id(a) for a in outputs}
        for key, (arr, at, writer, source) in cut.items():
            span = mem_range(arr)
            # the latest reader of its memory after the write (readers run from the last step back)
            read = next((op for when, op, reads in readers if when > at and any(overlap(span, mem_range(r))
                                                                                 for r in reads)), None)
            if read is not None and key not in objective:
                self.report(arr, writer, read, source, frame)

    def cuts(self, arr: Any) -> bool:
        """An array the program allocated that holds float values and no gradient."""
        wp = self.tracer.wp
        return (
            getattr(arr, SITE_ATTR, None) is not None
            and arr.grad is None
            and arr.size > 0
            and wp._src.types.type_scalar_type(arr.dtype) in (wp.float16, wp.float32, wp.float64)
        )

    def report(self, arr: Any, writer: Any, reader: Any, source: str, frame: Any) -> None:
        path, line = getattr(arr, SITE_ATTR)
        name = self.tracer.name_of(arr, frame) or f"the array allocated at {path}:{line}"
        shown = f"`{name}`" if not name.startswith("the array") else name
        msg = (
            f"{shown} has no gradient (allocated here without requires_grad), but the {writer.label} at "
            f"{writer.path}:{writer.line} writes it from values that depend on `{source}` and the {reader.label} "
            f"at {reader.path}:{reader.line} reads it on the way to the loss: the backward stops at it, so "
            f"`{source}` misses that part of its gradient"
        )
        self.tracer.add_finding("WF201", path, line, msg, ("WF201", path, line), classified_as="WF201",
                                runtime="cut-chain", array=name, family=name)  # fmt: skip


def _cut_copy(op: Any, tape: Any) -> bool:
    """A ``wp.copy`` that ran while ``tape`` recorded, into an array with a gradient from one without: Warp
    records a copy only when both have gradients, so the chain through it ends at its source."""
    if op.kind != "copy" or op.tape is not None or op.recording is not tape or not op.reads or not op.writes:
        return False
    return op.reads[0].arr.grad is None and all(w.arr.grad is not None for w in op.writes)


def _unseen_writes(op: Any, reads: list[Any]) -> list[Any]:
    """What a launch the probe saw write nothing may have written: Warp's flags call some arrays a kernel
    changes read-only (warp.fem accumulating its integrals into ``result``), and its adjoint flows from
    any of its arrays with a gradient."""
    if op is None or op.kind != "launch":
        return []
    return [a for a in reads if a.grad is not None]
