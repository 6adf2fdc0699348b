"""What a finite-difference replay must treat differently from a plain re-run of the program's
operations: arrays it puts back over values computed from the perturbed leaf, leaf-dependent values the
program's tape holds constant, and the leaves of checkpoint segments judged at their own backwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .records import ArrayInfo, Op, PendingCompare, ReplayPlan
from .spans import overlap


def _from_leaf(ops: list[Op], plan: ReplayPlan, leaf: ArrayInfo) -> Iterator[tuple[Op, list[ArrayInfo], list[Any]]]:
    """Each operation of the replay from the leaf's first perturbation on, with its reads that hold values
    computed from ``leaf`` and the memory spans holding such values before it (what it writes from such a
    read joins them after)."""
    starts = [at for at, infos in plan.leaves_at.items() if leaf in infos]
    tainted = [leaf.span]
    for op in ops[min(starts, default=plan.start) : plan.n_ops]:
        hit = [r for r in op.reads if r is leaf or any(overlap(r.span, span) for span in tainted)]
        yield op, hit, tainted
        if hit:
            tainted += [w.span for w in op.writes if w.span is not None]


def put_back_downstream(ops: list[Op], plan: ReplayPlan, leaf: ArrayInfo) -> ArrayInfo | None:
    """The first array a replay puts back (``plan.resets``), with contents other than zeros, over memory holding
    values computed from ``leaf`` by then: the replay cuts the leaf's influence there, so its FD is not the FD
    of the program's loss."""
    if not plan.resets:
        return None
    for op, _, tainted in _from_leaf(ops, plan, leaf):
        for info in plan.resets.get(op.index, ()):
            zeroed = not np.any(info.snap.numpy())  # the program cleared it (a buffer lent again): a constant
            if not zeroed and any(overlap(info.span, span) for span in tainted):
                return info
    return None


def held_constant(ops: list[Op], plan: ReplayPlan, leaf: ArrayInfo) -> tuple[ArrayInfo, Op] | None:
    """An array without a gradient that a taped operation reads and an untaped one computed from ``leaf``
    (with that untaped operation): the program's tape treats values that depend on the leaf as constants,
    so the objective's FD and autodiff differentiate different functions."""
    untaped: list[tuple[ArrayInfo, Op]] = []  # leaf-dependent arrays written outside any tape, by whom
    for op, hit, _ in _from_leaf(ops, plan, leaf):
        if not hit:
            continue
        if op.tape is None:
            untaped += [(w, op) for w in op.writes]
            continue
        for r in hit:
            if r.arr is not None and not r.arr.requires_grad:
                writer = next((o for a, o in reversed(untaped) if a is r or overlap(a.span, r.span)), None)
                if writer is not None:
                    return r, writer
    return None


def hold_completed_segments(ops: list[Op], job: PendingCompare, later: list[PendingCompare]) -> None:
    """Checkpoint segments backwarded in reverse (a tape per segment; the last backwarded from the loss, each
    earlier one seeded with the gradient the later one left at their boundary): a leaf every segment reads (a
    stiffness) gets from each backward only its own segment's share, the seeded backwards adding the rest. So
    where a leaf's reads before this backward's tape are all recorded on tapes a later seeded backward of the
    iteration replays, FD perturbs it from this tape's first read: the earlier segments' share is judged at
    their own backwards. Reads on no tape, or on a tape never backwarded, stay in (a truncated objective); so do
    reads on a tape whose later backward is seeded elsewhere than at arrays this backward's tape read (no
    segment boundary)."""
    read_here = {id(r.arr) for op in ops[job.plan.start:job.plan.n_ops] if op.tape is job.tape for r in op.reads}
    seeded = {id(j.tape) for j in later if j.tape is not None and j.objective.how != "loss"
              and any(id(arr) in read_here for arr, _ in j.objective.seeds)}  # fmt: skip
    if not seeded or job.objective.how != "loss":
        return
    for at, leaves in list(job.plan.leaves_at.items()):
        for info in list(leaves):
            first = job.tape_reads.get(info.order)
            if first is None or first <= at:
                continue
            earlier = [op for op in ops[at:first] if any(r.order == info.order for r in op.reads)]
            if earlier and all(op.tape is not None and id(op.tape) in seeded for op in earlier):
                leaves.remove(info)
                job.plan.leaves_at.setdefault(first, []).append(info)
                job.notes[id(info)] = (f"perturbed from this tape's first read (op {first}): its earlier reads are "
                                       "on checkpoint segments a later seeded backward replays")  # fmt: skip
        if not leaves:
            del job.plan.leaves_at[at]
