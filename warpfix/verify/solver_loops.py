"""Iterative solves whose iteration count the program decided on the host, and how a replay finishes them.

A solver like ``warp.optim.linear.cg`` runs cycles of iterations until a residual it reads on the host
(``r_norm_sq.numpy()`` every ``check_every`` iterations) is small enough. The probe's FD replays repeat the
operations the program ran, so a perturbed replay stops after the program's iteration count: its solve is
cut off where the program's had converged, and FD differentiates the truncated solve (a smooth function of
the parameter, with another derivative) instead of the solution the program computed. In warp.fem's
elastic_shape example the truncated solve's FD is 8x autodiff's while re-running the program agrees.

So the probe keeps the small float arrays the program reads on the host in the window, and recognises a
solver loop: a cycle of repeated iterations between the last two reads of one array, the array read
(a device-side convergence guard) and written by that cycle, its value never above the last one read (the
program stopped at its smallest residual). A replay that reaches the loop's exit with a larger residual
than the program saw there runs the last cycle again, until the residual is as small as the program's,
stops changing, or as many cycles as the program ran have been added (part of the probe package:
relative imports, warp and numpy only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .records import ArrayInfo, Op
from .spans import overlap

#: Arrays larger than this are not convergence checks (a residual norm per batch entry is small).
MAX_RESIDUAL_SIZE = 64
#: Distinct host reads of one array a loop needs: a cycle of repeated iterations between two reads.
MIN_READS = 2


@dataclass(eq=False)
class SolverLoop:
    """The last cycle of an iterative solve in the window, and the residual that ended it."""

    body_start: int  # index of the cycle's first operation
    exit_at: int  # index of the operation the program ran after it read the residual and left the loop
    residual: ArrayInfo
    final: np.ndarray  # the residual the program read at the exit
    cycles: int  # identical cycles the program ran before the exit (the cap of added ones)


class HostReads:
    """The small float arrays of the window the program reads on the host, with where and what it read."""

    def __init__(self) -> None:
        self.reads: list[tuple[int, ArrayInfo, np.ndarray]] = []

    def clear(self) -> None:
        self.reads = []

    def on_read(self, at: int, info: ArrayInfo, value: Any) -> None:
        """The program read ``value`` from ``info``'s array on the host, before operation ``at``."""
        values = np.asarray(value)
        if values.dtype.kind == "f" and 0 < values.size <= MAX_RESIDUAL_SIZE:
            self.reads.append((at, info, values.reshape(-1).astype(np.float64)))

    def loops(self, ops: list[Op], start: int, end: int) -> dict[int, SolverLoop]:
        """The solver loops that exit inside the replayed operations ``ops[start:end]``, by exit index."""
        by_array: dict[int, list[tuple[int, ArrayInfo, np.ndarray]]] = {}
        for at, info, value in self.reads:
            if start <= at <= end:
                same = by_array.setdefault(info.order, [])
                if same and same[-1][0] == at:
                    same[-1] = (at, info, value)  # read again with no operation between: the last one counts
                else:
                    same.append((at, info, value))
        out: dict[int, SolverLoop] = {}
        for reads in by_array.values():
            loop = _loop_of(ops, reads)
            if loop is not None:
                out[loop.exit_at] = loop
        return out


def _loop_of(ops: list[Op], reads: list[tuple[int, ArrayInfo, np.ndarray]]) -> SolverLoop | None:
    if len(reads) < MIN_READS:
        return None
    positions = [at for at, _, _ in reads]
    info, final = reads[-1][1], reads[-1][2]
    if not np.all(np.isfinite(final)) or any(np.any(final > value) for _, _, value in reads[:-1]):
        return None
    cycle = ops[positions[-2] : positions[-1]]
    unit = _period(_signature(cycle))
    if unit is None:
        return None
    reads_it = any(overlap(r.span, info.span) or r is info for op in cycle for r in op.reads)
    writes_it = any(overlap(w.span, info.span) or w is info for op in cycle for w in op.writes)
    if not (reads_it and writes_it):
        return None
    # the iterations the program ran: the earlier gaps between reads made of the same iteration
    iterations = 0
    for k in range(len(positions) - 1, 0, -1):
        gap = _signature(ops[positions[k - 1] : positions[k]])
        if not gap or len(gap) % len(unit) or gap != unit * (len(gap) // len(unit)):
            break
        iterations += len(gap) // len(unit)
    cycles = max(1, iterations // (len(cycle) // len(unit)))
    return SolverLoop(positions[-2], positions[-1], info, final, cycles)


def _signature(ops: list[Op]) -> tuple[tuple[str, str], ...]:
    return tuple((op.kind, op.label) for op in ops)


def _period(signature: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...] | None:
    """The iteration a cycle repeats (its shortest period, at least twice), or None for no repetition."""
    n = len(signature)
    for size in range(1, n // 2 + 1):
        if n % size == 0 and signature == signature[:size] * (n // size):
            return signature[:size]
    return None


def finish_loop(loop: SolverLoop, ops: list[Op], residual: Callable[[], np.ndarray], check: Callable[[], None]) -> int:
    """Run the loop's last cycle again while the replay's residual is above the program's; return the cycles added.

    ``residual`` reads the residual array now; ``check`` raises when the FD time budget is spent.
    """
    cycle = ops[loop.body_start : loop.exit_at]
    added = 0
    current = residual()
    while added < loop.cycles and np.all(np.isfinite(current)) and np.any(current > loop.final):
        for op in cycle:
            check()
            op.replay()
        added += 1
        after = residual()
        if np.array_equal(after, current):
            break  # the solve stalls above the program's residual: more cycles change nothing
        current = after
    return added
