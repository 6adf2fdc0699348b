"""What one FD comparison costs, without losing verdicts: the step ladder a sample walks
(warpfix.verify.ladder), a pass on fewer samples than planned, the budget, and the replay's restore."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from warpfix.verify import judge
from warpfix.verify.fd import (
    FD_BUDGET_S,
    FD_PROGRAM_FACTOR,
    FiniteDifferences,
    distinct_digits,
    relative_difference,
)
from warpfix.verify.judge import StepResult
from warpfix.verify.ladder import STEP_LADDER, run_ladder
from warpfix.verify.records import ArrayInfo, Objective, ReplayPlan

ULP32 = float(np.spacing(np.float32(1.0)))


def _measure(f, x: float = 0.3):
    """``measure(k)`` of a scalar loss ``f`` at ``x`` (central pair at rung k), and the rungs it measured."""
    seen: list[int] = []

    def measure(k: int) -> StepResult:
        seen.append(k)
        t = STEP_LADDER[k]
        return StepResult(t, f(x + t), f(x - t))

    return measure, seen


def _stiff(x: float) -> float:
    """A loss whose largest step is far too coarse (FD at t=0.1 is off by 60%); exact from t=0.01 on."""
    return 1.0 + x + 20.0 * x**3


def _slope(x: float) -> float:
    return 1.0 + 60.0 * x * x


def test_a_sample_stops_at_the_first_pair_of_rungs_that_agree_further_down_the_ladder() -> None:
    measure, seen = _measure(_stiff)
    steps: list[StepResult] = []
    agreed = run_ladder(measure, _slope(0.3), ULP32, 0.0, 0, steps, lambda k: None)
    assert agreed == 1 and seen == [0, 1, 2]  # not the fourth rung: (1e-2, 1e-3) already agree with autodiff
    assert judge.judge_sample("element", _slope(0.3), steps, ULP32).status == judge.PASS


def test_a_sample_starts_where_the_leaf_last_agreed_and_falls_back_to_the_whole_ladder() -> None:
    measure, seen = _measure(_stiff)
    steps: list[StepResult] = []
    assert run_ladder(measure, _slope(0.3), ULP32, 0.0, 1, steps, lambda k: None) == 1
    assert seen == [1, 2] and len(steps) == 2
    # a wrong gradient: nothing agrees from there down, so the judge sees every rung, largest first, as before
    measure, seen = _measure(_stiff)
    steps = []
    assert run_ladder(measure, 2.0 * _slope(0.3), ULP32, 0.0, 1, steps, lambda k: None) is None
    assert sorted(seen) == [0, 1, 2, 3] and len(seen) == 4  # each rung measured once
    assert [s.t for s in steps] == list(STEP_LADDER)
    assert judge.judge_sample("element", 2.0 * _slope(0.3), steps, ULP32).status == judge.FAIL


def test_agreement_within_rounding_further_down_the_ladder_is_no_early_stop() -> None:
    # a loss of 1e3 in float32 whose slope is 1e-3: at t=1e-3 its FD is rounding (2 ulp of loss per step)
    big = 1000.0
    steps = [StepResult(1e-2, big + 1e-5, big - 1e-5), StepResult(1e-3, big + 1e-6, big - 1e-6)]
    ulp = float(np.spacing(np.float32(big)))
    assert judge.early_pass(1e-3, steps, ulp * 1e-3)
    assert not judge.early_pass(1e-3, steps, ulp * 1e-3, strict=True)


class _Probe(FiniteDifferences):
    """The FD mixin on a loss computed in numpy: ``sum(w * p**2)``, p the leaf (no Warp program to replay)."""

    def __init__(self, wp, n: int, stiff: bool = False) -> None:
        self.wp = wp
        self.rng = np.random.default_rng(0)
        self.fd_deadline = math.inf
        self.fd_start_rung: dict[int, int] = {}
        self.seconds: dict[str, float] = {}
        self.notes: list[str] = []
        self.ops: list = []
        self.started = time.perf_counter()
        self.fd_seconds = 0.0
        self.fd_floor = FD_BUDGET_S
        self.fd_job_budget = FD_BUDGET_S
        self.x = np.linspace(0.5, 1.5, n)
        self.w = np.linspace(1.0, 2.0, n)
        self.stiff = stiff  # sum(exp(8 p)) instead: FD at the largest step is 10% off, exact from the next on
        self.replays = 0

    def replay(self, plan, objective, perturb, capture=None, diverged=None, non_finite=None) -> float:
        self.replays += 1
        p = self.x + next(iter(perturb.values())) if perturb else self.x
        return float(np.sum(np.exp(8.0 * p))) if self.stiff else float(np.sum(self.w * p * p))

    def grad(self) -> np.ndarray:
        return 8.0 * np.exp(8.0 * self.x) if self.stiff else 2.0 * self.w * self.x


def _compare(most: int, factor: float = 1.0, stiff: bool = False) -> tuple[dict, _Probe]:
    wp = pytest.importorskip("warp")
    probe = _Probe(wp, 16, stiff)
    arr = wp.array(probe.x.astype(np.float32), dtype=wp.float32, device="cpu")
    info = ArrayInfo(arr=arr, order=0, snap=None, name="w", hash=0)
    value = probe.replay(None, None, {})
    probe.replays = 0
    ulp = float(np.spacing(np.float32(value)))
    res = probe.compare_param(info, Objective([], "loss"), value, ulp, 0.0, value, True, {0: probe.x},
                              factor * probe.grad(), ReplayPlan(0, [], {}), most)  # fmt: skip
    return res, probe


def test_a_pass_on_fewer_perturbations_than_planned_is_insufficient_not_a_pass() -> None:
    assert _compare(6)[0]["verdict"] == judge.PASS
    res = _compare(2)[0]  # the budget allows two of the six samples
    assert res["verdict"] == judge.UNRELIABLE
    assert judge.INSUFFICIENT in res["reason"] and "2 perturbation(s) instead of 6" in res["reason"]
    # a mismatch on the samples it could afford is still a mismatch
    assert _compare(2, factor=2.0)[0]["verdict"] == judge.FAIL


def test_later_samples_of_a_leaf_start_at_the_rung_where_its_first_sample_agreed() -> None:
    res, probe = _compare(6, stiff=True)
    assert res["verdict"] == judge.PASS
    assert list(probe.fd_start_rung.values()) == [1]
    # the first sample (a slope the loss's float32 rounding blurs at small steps) runs the whole ladder (eight
    # replays), the second rungs 0-2 (six), the four others rungs 1-2 (four each): 30, where the first pair only
    # (rungs 0-1, 10% apart) would have cost eight each
    assert probe.replays == 8 + 6 + 4 * 4
    res, probe = _compare(6, factor=1.5, stiff=True)  # wrong everywhere: every sample runs the whole ladder
    assert res["verdict"] == judge.FAIL
    assert probe.replays == 6 * 8


def test_the_fd_budget_follows_the_program_above_its_floor() -> None:
    probe = _Probe(None, 1)
    probe.started = time.perf_counter() - 1.0  # a short program: the floor
    assert probe.fd_budget() == pytest.approx(FD_BUDGET_S)
    long_run = 4.0 * FD_BUDGET_S / FD_PROGRAM_FACTOR
    probe.started = time.perf_counter() - long_run - 3.0
    probe.fd_seconds = 3.0  # FD's own time is not the program's
    assert probe.fd_budget() == pytest.approx(FD_PROGRAM_FACTOR * long_run, rel=1e-3)
    probe.started -= 5.0
    probe.seconds = {"trace": 4.0, "integrity": 1.0}  # nor is the probe's tracing
    assert probe.fd_budget() == pytest.approx(FD_PROGRAM_FACTOR * long_run, rel=1e-3)
    probe.fd_floor = 8.0 * long_run  # a floor that the program's own run time stays under
    assert probe.fd_budget() == pytest.approx(8.0 * long_run)


def test_the_replay_restore_copies_host_memory_as_wp_copy_does() -> None:
    wp = pytest.importorskip("warp")
    probe = _Probe(wp, 1)
    probe.aliases = {}
    probe.nograd = lambda arr: arr
    probe.orig = {"copy": wp.copy}
    base = wp.array(np.arange(24, dtype=np.float32).reshape(6, 4), dtype=wp.float32, device="cpu")
    column = base[:, 1]  # a strided view: copied by Warp
    vec = wp.array(np.ones((5, 3), dtype=np.float32), dtype=wp.vec3, device="cpu")
    infos = [ArrayInfo(a, k, wp.clone(a), f"a{k}", 0) for k, a in enumerate([base, column, vec])]
    want = [i.arr.numpy().copy() for i in infos]
    base.fill_(-1.0)
    vec.fill_(7.0)
    plan = ReplayPlan(0, infos, {})
    assert probe.replay_restore(plan) is None
    assert [n is None for _, _, n in plan.copies] == [False, True, False]  # reversed order: vec, column, base
    for info, values in zip(infos, want, strict=True):
        np.testing.assert_array_equal(info.arr.numpy(), values)


def test_a_replay_that_departs_in_the_eighth_digit_shows_the_digits_that_differ() -> None:
    wp = pytest.importorskip("warp")
    probe = _Probe(wp, 16, False)
    arr = wp.array(probe.x.astype(np.float32), dtype=wp.float32, device="cpu")
    info = ArrayInfo(arr=arr, order=0, snap=None, name="w", hash=0)
    res = probe.compare_param(info, Objective([], "loss"), 271.5597839, 1e-5, 0.0, 271.5598145, False,
                              {0: probe.x}, probe.grad(), ReplayPlan(0, [], {}))  # fmt: skip
    assert res["verdict"] == judge.UNRELIABLE
    assert "gives loss 271.55981 instead of 271.55978, relative difference 1.1e-07" in res["reason"]
    assert distinct_digits(1.5, 1.5) == ("1.5", "1.5") and relative_difference(1.5, 1.5) == ""


def test_a_spent_budget_is_reported_as_it_was_when_the_comparison_began() -> None:
    """The budget grows with the program's own run time; FD's time during the comparison is not the program's,
    so the message gives the budget fixed at the comparison's start (diffray said 34 s for a 13 s budget)."""
    wp = pytest.importorskip("warp")
    probe = _Probe(wp, 16)
    probe.started = time.perf_counter() - 1000.0  # fd_budget() would now say 2000 s
    probe.fd_job_budget = 13.0
    probe.fd_deadline = 0.0  # spent before the first perturbation
    arr = wp.array(probe.x.astype(np.float32), dtype=wp.float32, device="cpu")
    info = ArrayInfo(arr=arr, order=0, snap=None, name="w", hash=0)
    value = probe.replay(None, None, {})
    res = probe.compare_param(info, Objective([], "loss"), value, 1e-6, 0.0, value, True, {0: probe.x}, probe.grad(),
                              ReplayPlan(0, [], {}))  # fmt: skip
    assert res["verdict"] == judge.UNRELIABLE
    assert res["reason"] == "the FD time budget (13 s) ran out before this parameter was judged"
