"""Solver loops in the verify probe's window (warpfix.verify.solver_loops) and the replay's put-back check
(warpfix.verify.fd.put_back_downstream), on recorded operations made by hand: no Warp program runs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from warpfix.verify.fd import put_back_downstream
from warpfix.verify.records import ArrayInfo, Op, ReplayPlan
from warpfix.verify.solver_loops import HostReads, finish_loop


def _info(order: int, first: int, size: int = 4, snap: float = 1.0) -> ArrayInfo:
    held = SimpleNamespace(numpy=lambda: np.full(size, snap))  # the contents a replay puts back
    return ArrayInfo(arr=None, order=order, snap=held, name=f"a{order}", hash=0, span=("cpu", first, first + size))


class _Solve:
    """A hand-made iterative solve: each iteration is three operations; the last one halves the residual
    (and reads it, like CG's guarded update)."""

    def __init__(self) -> None:
        self.resid = _info(0, 0)
        self.x = _info(1, 100)
        self.value = np.array([1.0])
        self.ops: list[Op] = []

    def op(self, label: str, reads: list[ArrayInfo], writes: list[ArrayInfo], replay=lambda: None) -> None:
        self.ops.append(Op(len(self.ops), "launch", label, "solve.py", 1, None, replay, reads, writes))

    def iteration(self) -> None:
        self.op("launch of kernel matvec", [self.x], [self.x])
        self.op("launch of kernel dot", [self.x], [self.x])
        self.op("launch of kernel update", [self.resid, self.x], [self.resid, self.x], self.halve)

    def halve(self) -> None:
        self.value = self.value / 2.0

    def run(self, reads: HostReads, iterations: int, check_every: int) -> None:
        """The program: iterate, reading the residual on the host every ``check_every`` iterations."""
        self.op("launch of kernel init", [], [self.resid, self.x])
        for k in range(1, iterations + 1):
            self.iteration()
            self.halve()
            if k % check_every == 0:
                reads.on_read(len(self.ops), self.resid, self.value)


def test_a_loop_stopped_on_a_host_read_residual_is_found_with_its_last_cycle() -> None:
    solve, reads = _Solve(), HostReads()
    solve.run(reads, iterations=12, check_every=4)
    solve.op("launch of kernel loss", [solve.x], [])
    loops = reads.loops(solve.ops, 0, len(solve.ops))
    assert list(loops) == [37]  # the exit: the operation after the last read
    loop = loops[37]
    # two cycles between reads (the four iterations before the first read are not seen as one)
    assert (loop.body_start, loop.cycles, float(loop.final[0])) == (25, 2, 0.5**12)


def test_a_replay_whose_residual_is_larger_runs_more_cycles_until_it_is_as_small() -> None:
    solve, reads = _Solve(), HostReads()
    solve.run(reads, iterations=12, check_every=4)
    loop = reads.loops(solve.ops, 0, len(solve.ops))[37]
    solve.value = np.array([0.5**4])  # a perturbed replay that converged less: 8 iterations short
    added = finish_loop(loop, solve.ops, lambda: solve.value.copy(), lambda: None)
    assert added == 2 and float(solve.value[0]) == 0.5**12
    solve.value = np.array([0.5**13])  # already below the program's residual: nothing to add
    assert finish_loop(loop, solve.ops, lambda: solve.value.copy(), lambda: None) == 0


def test_a_stalled_replay_stops_adding_cycles() -> None:
    solve, reads = _Solve(), HostReads()
    solve.run(reads, iterations=12, check_every=4)
    loop = reads.loops(solve.ops, 0, len(solve.ops))[37]
    stuck = np.array([1.0])
    assert finish_loop(loop, solve.ops, lambda: stuck, lambda: None) == 1


def test_host_reads_that_are_no_convergence_check_make_no_loop() -> None:
    # a value that grows (a loss printed during a simulation) is not a residual the program stopped on
    solve, reads = _Solve(), HostReads()
    solve.run(reads, iterations=8, check_every=4)
    reads.reads[-1] = (reads.reads[-1][0], solve.resid, np.array([5.0]))
    assert reads.loops(solve.ops, 0, len(solve.ops)) == {}
    # an array the repeated cycle neither reads nor writes (no device-side guard)
    solve, reads = _Solve(), HostReads()
    solve.run(reads, iterations=8, check_every=4)
    other = _info(7, 500)
    reads.reads = [(at, other, value) for at, _, value in reads.reads]
    assert reads.loops(solve.ops, 0, len(solve.ops)) == {}
    # one read, or a gap between reads that is no repeated iteration
    solve, reads = _Solve(), HostReads()
    solve.run(reads, iterations=1, check_every=1)
    solve.iteration()
    reads.on_read(len(solve.ops), solve.resid, np.array([0.1]))
    assert reads.loops(solve.ops, 0, len(solve.ops)) == {}


def test_put_back_memory_holding_values_from_the_leaf_makes_the_replay_no_evidence() -> None:
    leaf, tmp, late, const = _info(0, 0), _info(1, 100), _info(2, 100), _info(3, 300)
    ops = [
        Op(0, "launch", "launch of kernel assemble", "p.py", 1, None, lambda: None, [leaf], [tmp]),
        Op(1, "launch", "launch of kernel fill", "p.py", 2, None, lambda: None, [const], [const]),
        Op(2, "launch", "launch of kernel solve", "p.py", 3, None, lambda: None, [late], [late]),
    ]
    # `late` lies over the memory `assemble` wrote from the leaf, and the replay puts it back at op 2
    plan = ReplayPlan(3, [leaf, tmp, late], {0: [leaf]}, resets={2: [late]})
    assert put_back_downstream(ops, plan, leaf) is late
    # a put-back over memory nothing computed from the leaf (a pooled buffer refilled with constants)
    plan = ReplayPlan(3, [leaf, tmp, const], {0: [leaf]}, resets={1: [const]})
    assert put_back_downstream(ops, plan, leaf) is None
    # zeros put back over memory the leaf's values were in: the program cleared a buffer lent again
    cleared = _info(4, 100, snap=0.0)
    plan = ReplayPlan(3, [leaf, tmp, cleared], {0: [leaf]}, resets={2: [cleared]})
    assert put_back_downstream(ops, plan, leaf) is None
