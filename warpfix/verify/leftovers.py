"""WF903 where a leftover gradient is consumed: a ``.grad`` that an earlier backward produced and the
program already consumed (read by a launch, a copy, the host), left un-zeroed, summed into by the next
backward and then consumed again. The finding is at the program's line of that second read.

This is the missing ``tape.zero()`` inside one iteration too, where the window-start check of the probe
(a parameter's gradient non-zero when the next iteration's backward starts) does not look: checkpoint
segments whose backward hands each segment's gradients on to the next one (``example_fluid_checkpoint``
with the zero of a segment dropped). Gradients set by hand between the backwards (a seed copied into
``x.grad``, ``fill_``) and gradients never read before the next backward (accumulation on purpose, over
micro-batches) are no leftovers: only a gradient whose contents are still the earlier backward's, read
once already, counts.

Arrays are matched by address (a flattened view of a gradient is the gradient) and contents by digest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .records import digest


@dataclass
class _Produced:
    grad: Any  # the gradient array a backward wrote
    owner: Any  # the array it is the gradient of
    site: str  # that backward's "path:line"
    digest: int  # its contents right after that backward
    consumed: bool = False  # read since


@dataclass
class _Summed:
    produced: _Produced  # the gradient as the later backward left it
    earlier: str  # the backward whose consumed gradient it still held


class Leftovers:
    """Follows the gradients of every backward until the next one; ``report(path, line, message, data)``
    records a WF903 at a consuming read."""

    def __init__(self, report: Callable[[str, int, str, dict[str, Any]], None],
                 name_of: Callable[[Any], str]) -> None:
        self.report = report
        self.name_of = name_of
        self.produced: dict[int, _Produced] = {}  # gradient address -> what the latest backward left there
        self.summed: dict[int, _Summed] = {}
        self.candidates: dict[int, _Produced] = {}

    def before_backward(self) -> None:
        """The consumed gradients still holding an earlier backward's values, non-zero. A gradient changed
        since (zeroed, seeded by hand) is no longer that backward's: it is not followed further."""
        self.candidates = {}
        for ptr, p in list(self.produced.items()):
            if digest(p.grad) != p.digest:
                del self.produced[ptr]
            elif p.consumed and np.any(p.grad.numpy() != 0):
                self.candidates[ptr] = p
        self.summed = {ptr: s for ptr, s in self.summed.items() if self.produced.get(ptr) is s.produced}

    def after_backward(self, tape: Any, site: str, is_array: Callable[[Any], bool]) -> None:
        """The candidates this backward added into are leftovers; its gradients are followed from here."""
        fresh: dict[int, _Produced] = {}
        for owner, grad in list(tape.gradients.items()):
            if is_array(owner) and is_array(grad) and grad.ptr:
                fresh[grad.ptr] = _Produced(grad, owner, site, digest(grad))
        for ptr, old in self.candidates.items():
            now = fresh.get(ptr)
            if now is not None and now.digest != old.digest:
                self.summed[ptr] = _Summed(now, old.site)
        self.candidates = {}
        self.produced.update(fresh)

    def read(self, arrays: list[Any], site: Callable[[], tuple[str, int]]) -> None:
        """The program reads ``arrays`` at ``site()`` (its path and line)."""
        for arr in arrays:
            ptr = getattr(arr, "ptr", None)
            p = self.produced.get(ptr) if ptr else None
            if p is None or digest(p.grad) != p.digest:
                continue
            p.consumed = True
            summed = self.summed.pop(ptr, None)
            if summed is None or summed.produced is not p:
                continue
            name = self.name_of(p.owner)
            earlier = ("of an earlier run of that backward" if summed.earlier == p.site
                       else f"of the backward at {summed.earlier}")
            msg = (f"`{name}.grad` read here holds the gradient of the backward at {p.site} summed with the one "
                   f"{earlier}, which was consumed already and never zeroed (missing tape.zero())")
            data = {"array": name, "arrays": [name], "earlier": summed.earlier, "backward": p.site}
            self.report(*site(), msg, data)
