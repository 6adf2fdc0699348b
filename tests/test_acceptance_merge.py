"""``apply --check`` on WF601's shared-episode-loss hoist, and on edits FD rejects before and after.

The hoist merges N backwards of one loss array, each window adding into it (zeroed once per episode), into
one backward after the loop: the forward compared is the last loss the N backwards saw. The probe runs the
first iteration's backwards past its cap for their loss alone, so that last one is the episode's.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from warpfix.acceptance import judge
from warpfix.run_summary import fd_summary
from warpfix.verify import run_verify
from warpfix.verify.backward_checks import BACKWARD_CAP, BackwardChecks
from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport, make_finding
from warpfix.verify.sketch import sketch

PROGRAMS = Path(__file__).parent / "verify_programs"
GRAD = np.random.default_rng(3).standard_normal(64)


def _param(verdict: str, grad: np.ndarray = GRAD) -> ParamResult:
    return ParamResult("k", verdict, "" if verdict == "pass" else "dense", 1e-3, 1.0, ad_sketch=sketch(grad))


def _per_step(losses: list[float], running: bool = True, findings=()) -> dict:
    """A tape per step, each backward of the running loss: FD agrees at the first (nothing truncated yet)
    and disagrees at the others; ``running``: every backward after the first saw the loss the previous one did."""
    backwards = [BackwardResult(f"main.py:{30}", loss, [_param("pass" if i == 0 else "fail")], running=running and i > 0)
                 for i, loss in enumerate(losses)]
    return fd_summary(VerifyReport(backwards=backwards, findings=list(findings)))


def _hoisted(loss: float, verdict: str = "pass") -> dict:
    return fd_summary(VerifyReport(backwards=[BackwardResult("main.py:32", loss, [_param(verdict)])]))


SUMS = [0.5, 1.25, 1.25, 2.0]  # a step that added nothing keeps the sum


def test_a_hoist_of_backwards_of_a_running_loss_is_judged_on_the_last_loss() -> None:
    ok, why = judge(_per_step(SUMS), _hoisted(2.0), ["WF601"])
    assert ok, why
    assert why == ("the episode loss 4 backwards saw accumulate (running sums) unchanged at the last (2.0 -> 2.0, "
                   "one backward); FD agreement now passes")


@pytest.mark.parametrize(("before", "after", "why"), [
    (_per_step(SUMS), _hoisted(2.5), "their total loss (5.0 -> 2.5)"),  # the episode's loss changed
    (_per_step([0.5, 1.25, 1.0, 2.0]), _hoisted(2.0), "their total loss"),  # a sum fell: no running sums
    (_per_step(SUMS, running=False), _hoisted(2.0), "their total loss"),  # the loss zeroed between the steps
    (_per_step(SUMS), _hoisted(2.0, "fail"), "FD still disagrees after the edit"),
    (_per_step(SUMS[:1]), _hoisted(0.5, "fail"), "FD still disagrees after the edit"),
])  # fmt: skip
def test_a_hoist_of_backwards_that_are_no_running_sums_or_change_the_last_is_refused(before, after, why) -> None:
    ok, reason = judge(before, after, ["WF601"])
    assert not ok and why in reason, reason


def test_a_hoist_whose_later_iteration_still_fails_is_judged_on_the_last_window_against_the_one_backward() -> None:
    """beam_lift (blind corpus): FD disagreed at the last window's backward (the episode loss on a truncated
    tape) and agrees at the one backward that replaced the windows; a failure at the next iteration (another
    bug the program had before the edit too, an intermediate's left-over adjoint) starts from other
    parameters and is not compared."""
    later = BackwardResult("main.py:32", 1.5, [_param("fail")], window=1)
    after = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:32", 2.0, [_param("pass")]), later]))
    ok, why = judge(_per_step(SUMS), after, ["WF601"])
    assert ok and "FD agreement now passes at backward(s) 1" in why, why
    still = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:32", 2.0, [_param("fail")]), later]))
    assert not judge(_per_step(SUMS), still, ["WF601"])[0]


def test_two_backwards_after_the_merge_or_another_fix_are_not_judged_on_the_last_loss() -> None:
    two = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:32", 2.0, [_param("pass")])] * 2))
    assert not judge(_per_step(SUMS), two, ["WF601"])[0]
    ok, why = judge(_per_step(SUMS), _hoisted(2.0), ["WF105"])
    assert not ok and "loss unchanged at the 1 backward(s)" not in why


def test_fd_summary_reads_the_running_flags_and_the_loss_only_backwards() -> None:
    loss_only = BackwardResult("main.py:30", 2.0, [], running=True, loss_only=True)
    summary = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:30", 1.0, [_param("fail")]), loss_only]))
    assert summary["losses"] == [1.0, 2.0] and summary["running"] == [False, True]
    assert summary["first_verdicts"] == ["fail", "none"]
    assert BackwardResult(**{**loss_only.__dict__}).to_json()["loss_only"] is True


def test_running_sum_is_one_loss_array_written_only_by_taped_launches_between_backwards() -> None:
    loss, other, tape = object(), object(), object()
    launch = SimpleNamespace(kind="launch", tape=tape)
    probe = SimpleNamespace(loss_mark=None, ops=[launch, launch], arrays={})
    probe.arrays[id(loss)] = SimpleNamespace(arr=loss, writes_at=[1])
    assert not BackwardChecks.running_sum(probe, loss)  # the first backward of the iteration
    probe.ops.append(launch)
    probe.arrays[id(loss)].writes_at.append(2)
    assert BackwardChecks.running_sum(probe, loss)
    probe.ops.append(SimpleNamespace(kind="zero", tape=None))  # loss.zero_() between the backwards
    probe.arrays[id(loss)].writes_at.append(3)
    assert not BackwardChecks.running_sum(probe, loss)
    assert BackwardChecks.running_sum(probe, loss)  # the zero was before the previous backward
    assert not BackwardChecks.running_sum(probe, other)  # another array
    assert not BackwardChecks.running_sum(probe, None) and probe.loss_mark is None



def test_a_loss_no_traced_operation_touched_since_the_last_backward_is_a_running_sum() -> None:
    """The windows before the first that adds to the loss (``if frame >= FRAMES // 2:``): the loss array is
    differentiated again, untouched, still holding what the zero before them left."""
    loss = object()
    probe = SimpleNamespace(loss_mark=None, ops=[], arrays={})
    assert not BackwardChecks.running_sum(probe, loss)  # the first backward
    probe.ops.append(SimpleNamespace(kind="launch", tape=object()))  # a launch that writes other arrays
    assert BackwardChecks.running_sum(probe, loss)
    probe.arrays = {}  # the window's arrays dropped since: nothing says what was written
    assert not BackwardChecks.running_sum(probe, loss)


_STALE = make_finding("WF903", "main.py", 36, "`k.grad` is already non-zero", {"array": "k"}, classified_as="WF301")


def test_a_zero_per_window_fd_rejects_before_and_after_is_refused_whatever_finding_went_away() -> None:
    """A ``tape.zero()`` per window on a tape-per-window program (the WF601 truncation): each backward adds the
    same gradient before and after it (FD disagreeing at the same backwards, on unchanged gradients) while the
    sum the optimizer consumes is now the last window's alone. The WF903 going away proved it; kept before."""
    before = _per_step(SUMS, findings=[_STALE])
    after = _per_step(SUMS)
    ok, why = judge(before, after, ["WF301"])
    assert not ok
    assert why == ("FD still disagrees after the edit and agrees nowhere it disagreed before: the runtime checks "
                   "show a finding gone, not the gradient the program consumes right")
    # where FD cannot judge (chaos), the runtime check going clean still proves it, the loss unchanged
    unreliable = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:30", 2.0, [_param("unreliable")])]))
    stale = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:30", 2.0, [_param("unreliable")])],
                                    findings=[_STALE]))
    ok, why = judge(stale, unreliable, ["WF301"])
    assert ok and "FD is unreliable here, so the runtime checks decided" in why, why


@pytest.mark.slow
def test_the_probe_runs_the_backwards_past_its_cap_for_their_loss_alone() -> None:
    report = run_verify([sys.executable, "shared_loss.py"], cwd=str(PROGRAMS), timeout=120)
    first = report.first_iteration
    assert len(first) == 40 and [b.loss_only for b in first] == [False] * BACKWARD_CAP + [True] * 8
    assert all(b.params for b in first[:BACKWARD_CAP]) and not any(b.params for b in first[BACKWARD_CAP:])
    assert [b.running for b in first] == [False] + [True] * 39
    assert all(b.loss >= a.loss for a, b in zip(first, first[1:], strict=False))
    assert report.stopped == "cap" and not [b for b in report.backwards if b.window > 0]


@pytest.mark.slow
def test_apply_check_keeps_the_hoist_of_a_shared_episode_loss_past_the_cap(tmp_path, monkeypatch) -> None:
    from warpfix.apply import Selection, check_fixes

    for name in ("shared_loss.py", "common_kernels.py"):
        shutil.copy(PROGRAMS / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    result = check_fixes(["shared_loss.py"], [sys.executable, "shared_loss.py"],
                         selection=Selection(select=["WF601"], use_cache=False))
    [edit] = result.edits
    assert edit.kept, edit.reason
    assert "the episode loss 40 backwards saw accumulate (running sums) unchanged at the last" in edit.reason
    # the hoisted program's initial state keeps a gradient nothing reads: no WF903
    assert edit.fd_after["runtime_findings"] == []
