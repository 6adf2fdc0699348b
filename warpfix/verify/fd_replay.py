"""The verify probe's FD replays: the recorded window put back as it was where its first tape began
and run again up to the backward, a leaf perturbed right before its first read (see
:mod:`warpfix.verify.fd`); and where a replay departs from the program's run or writes a NaN or inf.

A mixin of :class:`~warpfix.verify.fd.FiniteDifferences` (so of the probe's ``Tracer``): it works on the
tracer's recorded window (``ops``) and FD deadline, and is part of the probe package (relative imports,
warp and numpy only).
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import numpy as np

from .records import ArrayInfo, Objective, Op, ReplayPlan, digest, flat


class FdReplay:
    """Replays of the window the tracer recorded, for FD (mixed into ``FiniteDifferences``)."""

    def restore(self, infos: list[ArrayInfo], source: dict[int, Any]) -> None:
        copy = self.orig["copy"]
        for info in reversed(infos):
            copy(self.nograd(info.arr), source[id(info)])

    def replay(
        self,
        plan: ReplayPlan,
        objective: Objective,
        perturb: dict[int, np.ndarray],
        capture: dict[int, np.ndarray] | None = None,
        diverged: list[tuple[Op, ArrayInfo]] | None = None,
        non_finite: list[tuple[Op, ArrayInfo]] | None = None,
    ) -> float:
        """Restore the window as it was where its first tape began, replay its operations up to the backward;
        return the objective.

        ``perturb`` maps a leaf's order to a flat delta added right before its first read;
        ``capture`` receives each leaf's flat value at that point; ``diverged`` (given for an unperturbed
        replay) receives the first operation that reads contents other than the program's run read there;
        ``non_finite`` the first operation that writes a NaN or inf.
        """
        started = time.perf_counter()
        try:
            return self._replay(plan, objective, perturb, capture, diverged, non_finite)
        finally:
            self.seconds["fd_replay"] = self.seconds.get("fd_replay", 0.0) + time.perf_counter() - started
            self.seconds["replays"] = self.seconds.get("replays", 0.0) + 1.0

    def _replay(
        self,
        plan: ReplayPlan,
        objective: Objective,
        perturb: dict[int, np.ndarray],
        capture: dict[int, np.ndarray] | None,
        diverged: list[tuple[Op, ArrayInfo]] | None,
        non_finite: list[tuple[Op, ArrayInfo]] | None,
    ) -> float:
        copy = self.orig["copy"]
        self.replay_restore(plan)
        for op in self.ops[plan.start : plan.n_ops]:
            if time.perf_counter() > self.fd_deadline:
                raise _BudgetSpent
            if diverged is not None and not diverged:
                diverged += [(op, i) for i in op.reads if op.read_hash.get(i.order, None) not in (None, digest(i.arr))][:1]
            for info in plan.resets.get(op.index, ()):
                copy(self.nograd(info.arr), info.snap)
            for info in plan.leaves_at.get(op.index, ()):
                if capture is not None:
                    capture[info.order] = flat(info.arr.numpy()).copy()
                if info.order in perturb:
                    cur = info.arr.numpy()
                    new = (flat(cur) + perturb[info.order]).astype(cur.dtype).reshape(cur.shape)
                    src = self.wp.array(new, dtype=info.arr.dtype, device=info.arr.device)
                    self.orig["copy"](self.nograd(info.arr), src)
            op.replay()
            if non_finite is not None and not non_finite:
                non_finite += [(op, i) for i in op.writes if _has_non_finite(i.arr)][:1]
        return objective.value()

    def replay_restore(self, plan: ReplayPlan) -> None:
        """Put the window's arrays back as they were where the replay begins."""
        if plan.copies is None:
            plan.copies = self.restore_copies(plan)
        copy = self.orig["copy"]
        for dst, src, nbytes in plan.copies:
            if nbytes is None:
                copy(dst, src)
            else:
                ctypes.memmove(dst, src, nbytes)

    def restore_copies(self, plan: ReplayPlan) -> list[tuple[Any, Any, int | None]]:
        """How a replay puts back the window's arrays where it begins, in order: (destination address, source
        address, bytes) for contiguous host memory (a memmove: thousands of arrays cost a wp.copy each
        otherwise), (destination alias without gradient, source array, None) for the rest."""
        size_of = self.wp._src.types.type_size_in_bytes
        out: list[tuple[Any, Any, int | None]] = []
        for info in reversed(plan.restore):
            dst, src = info.arr, plan.start_state.get(info.order, info.snap)
            host = dst.device.is_cpu and src.device.is_cpu and dst.is_contiguous and src.is_contiguous
            if host and dst.ptr and src.ptr and dst.dtype == src.dtype and dst.shape == src.shape:
                out.append((dst.ptr, src.ptr, dst.size * size_of(dst.dtype)))
            elif dst.size:
                out.append((self.nograd(dst), src, None))
        return out

    def note_non_finite(self, plan: ReplayPlan, objective: Objective, perturb: dict[int, np.ndarray]) -> None:
        """Say (once) where a perturbed replay whose loss is not finite first writes a NaN or inf."""
        if any(n.startswith("a perturbed replay") for n in self.notes):
            return
        found: list[tuple[Op, ArrayInfo]] = []
        self.replay(plan, objective, perturb, non_finite=found)
        if found:
            op, info = found[0]
            where = f"{op.path}:{op.line}" + (f" (in {op.library})" if op.library else "")
            self.note(f"a perturbed replay first writes a non-finite value at the {op.label} at {where} "
                      f"(operation {op.index}, into `{info.name}`)")  # fmt: skip

    def note_divergence(self, plan: ReplayPlan, objective: Objective) -> None:
        """Say where an unperturbed replay that misses the program's loss first departs from its run."""
        diverged: list[tuple[Op, ArrayInfo]] = []
        self.replay(plan, objective, {}, diverged=diverged)
        if diverged:
            op, info = diverged[0]
            where = f"{op.path}:{op.line}" + (f" (in {op.library})" if op.library else "")
            self.note(f"the replay first departs from the program's run at the {op.label} at {where} "
                      f"(operation {op.index}): `{info.name}` holds other contents there than when the program ran it")  # fmt: skip


class _BudgetSpent(Exception):
    """The FD time budget ran out in the middle of a replay."""


def _has_non_finite(arr: Any) -> bool:
    values = arr.numpy()
    return values.dtype.kind in "fc" and not bool(np.all(np.isfinite(values)))
