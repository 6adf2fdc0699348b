"""When the verify probe may trust Warp's per-argument write flags (part of the probe package: relative
imports, warp and numpy only).

The probe skips hashing an array after a launch when Warp's code generation says the kernel never writes
that argument. The flags miss stores through a view of an argument: ``wp.tile_store(out[col], t)`` in
``warp.optim.linear``'s dot products writes ``out`` unflagged. A missed write makes the probe take the
product buffer for contents the program wrote outside the trace, so every replay put the program's own
``p.Ap`` back and a perturbed CG diverged. So the flags of a kernel that stores tiles are never trusted,
and the others' only after the kernel's first traced launch (which hashes every array) wrote nothing
they miss. (A first launch can write the value already there: CG's first ``r.r`` at ``x = 0`` is ``b.b``.)
"""

from __future__ import annotations

from typing import Any


class FlagTrust:
    """Per kernel: None (not yet seen traced), True (flags held at the first launch), False (never trust)."""

    def __init__(self) -> None:
        self.held: dict[int, bool] = {}

    def read_only(self, kernel: Any, unflagged: frozenset[int]) -> frozenset[int]:
        """The array ids this launch may skip hashing after it runs (none until the flags are proven)."""
        if id(kernel) not in self.held and _stores_tiles(kernel):
            self.held[id(kernel)] = False
        return unflagged if self.held.get(id(kernel)) else frozenset()

    def learn(self, kernel: Any, unflagged: frozenset[int], written: list[Any]) -> None:
        """After a kernel's first traced launch: ``written`` are the arrays it changed (ArrayInfo)."""
        if id(kernel) not in self.held:
            self.held[id(kernel)] = not any(id(i.arr) in unflagged for i in written)


def _stores_tiles(kernel: Any) -> bool:
    """True for a kernel whose code stores tiles: into a view of an argument (``out[col]``) as often as not."""
    source = getattr(getattr(kernel, "adj", None), "source", "") or ""
    return "tile_store" in source or "tile_atomic_add" in source
