"""``apply --check`` keeps no edit that the verifier runs around it do not prove (warpfix.acceptance).

The summaries come from :func:`fd_summary` of reports shaped like the probe's (per-backward losses,
windows, parameter verdicts and gradient sketches), as ``check_fixes`` builds them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from warpfix.acceptance import GRAD_RTOL, judge
from warpfix.run_summary import fd_summary
from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport, make_finding
from warpfix.verify.sketch import change, sketch

RNG = np.random.default_rng(7)
GRAD = RNG.standard_normal(4096) * 1e-5  # a leaf's gradient: small values, as the fluid example's


def _param(grad: np.ndarray, verdict: str = "pass", name: str = "vx") -> ParamResult:
    return ParamResult(name, verdict, "" if verdict == "pass" else "dense", 1e-3, 1.0, ad_sketch=sketch(grad))


def _report(losses: list[float], grads: list[np.ndarray], later: list[str] = (), findings=()) -> dict:
    """fd_summary of a run: one backward per loss in window 0 (gradient ``grads[i]``, FD passing),
    then one backward per verdict of ``later`` in window 1."""
    backwards = [BackwardResult(f"main.py:{40 + i}", loss, [_param(g)]) for i, (loss, g) in
                 enumerate(zip(losses, grads, strict=True))]
    backwards += [BackwardResult("main.py:40", 9.5, [_param(GRAD, v)], window=1) for v in later]
    return fd_summary(VerifyReport(backwards=backwards, findings=list(findings)))


def test_a_sketch_tells_a_changed_gradient_from_float_reordering() -> None:
    assert change(sketch(GRAD), sketch(GRAD.copy())) == 0.0
    reordered = (GRAD.astype(np.float32) * np.float32(1.0000001)).astype(np.float64)
    assert change(sketch(GRAD), sketch(reordered)) <= GRAD_RTOL
    wrong = GRAD.copy()
    wrong[:2048] *= 0.5  # the fluid mutant's fix: half the gradient's elements off by half
    assert change(sketch(GRAD), sketch(wrong)) > 0.1
    one = GRAD.copy()
    one[17] += 1e-3 * np.linalg.norm(GRAD)  # one element off by 1e-3 of the norm
    assert change(sketch(GRAD), sketch(one)) > GRAD_RTOL
    assert math.isinf(change(sketch(GRAD), sketch(GRAD[:100])))
    assert math.isinf(change(sketch(GRAD), sketch(np.full(4096, np.nan))))


def test_fd_summary_carries_the_gradient_sketches_and_the_later_verdicts() -> None:
    summary = _report([1.0, 1.0], [GRAD, 2 * GRAD], later=["pass", "fail"])
    assert summary["losses"] == [1.0, 1.0]
    assert summary["gradients"] == [{"vx": sketch(GRAD)}, {"vx": sketch(2 * GRAD)}]
    assert summary["later"] == ["pass", "fail"]


def test_fd_passing_on_both_sides_is_no_proof_when_the_edit_changed_the_gradient() -> None:
    """fluid_checkpoint_cb, zero-read (WF105): FD (its tolerance too loose for this program) passed before and
    after, while the edit changed the leaf's gradient at backward 2 by about half its norm. Kept before."""
    wrong = GRAD.copy()
    wrong[::2] *= 0.5
    before = _report([0.2063, 0.2063], [GRAD, GRAD])
    ok, why = judge(before, _report([0.2063, 0.2063], [GRAD, wrong]), ["WF105"])
    assert not ok
    assert why.startswith("FD agreed before and after, but the edit changed the gradient of `vx` at backward 2")
    assert "cannot tell which is right" in why


def test_fd_passing_on_both_sides_proves_an_edit_that_left_the_gradients_unchanged() -> None:
    before = _report([0.2063, 0.2063], [GRAD, GRAD])
    ok, why = judge(before, _report([0.2063, 0.2063], [GRAD, GRAD.copy()]), ["WF105"])
    assert ok
    assert why == "loss unchanged; FD agreed before and after, and the edit left the 2 checked gradient(s) unchanged"


def test_a_gradient_checked_before_and_not_after_is_no_proof_unless_the_program_now_trains_others() -> None:
    """golden WF302-step-in-tape-block: before the fix nothing is trained, so the probe compares the first
    leaf (`self._q`); after it the program trains `v` and FD checks `v` at both iterations. On the cloth
    step-into-taped-method mutant the WF106 edit changed the tape's leaves with no backward checked after the
    update, and was kept because WF905 went away; the program then did not train (recorder)."""
    before = _report([1.0], [GRAD])
    after = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:40", 1.0, [_param(GRAD, name="vy")])]))
    ok, why = judge(before, after, ["WF105"])
    assert not ok and "`vx` at backward 1 was checked before the edit and not after" in why
    trains = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:40", 1.0, [_param(GRAD, name="vy")]),
                                                BackwardResult("main.py:40", 0.5, [_param(GRAD, name="vy")], window=1)]))
    ok, why = judge(before, trains, ["WF302"])
    assert ok and why.endswith("; FD agreed before and after, and the edit changed which parameters FD compares "
                               "(`vx` -> `vy` at backward 1: the program trains others now), and FD agreed at the 1 "
                               "backward(s) checked after the first update")
    ok, why = judge({**before, "gradients": [{}]}, {**after, "gradients": [{}]}, ["WF105"])
    assert not ok and "no gradient checked in both runs can be compared" in why
    # the runtime checks prove that an overwrite went away, not what became of a gradient FD no longer compares
    tracker = make_finding("WF905", "main.py", 30, "overwrite", {"array": "vx"})
    ok, why = judge({**before, "integrity": ["WF905"], "integrity_arrays": ["WF905 vx"]}, after, ["WF106"])
    assert not ok and why.endswith("was checked before the edit and not after, so nothing shows what the edit did "
                                   "to the gradient"), why
    assert fd_summary(VerifyReport(backwards=[], findings=[tracker]))["integrity_arrays"] == ["WF905 vx"]


def test_a_changed_gradient_is_proven_by_the_runtime_checks_going_clean() -> None:
    """When FD cannot tell, the integrity check decides an overwrite fix as it does for chaotic programs."""
    wrong = 0.5 * GRAD
    tracker = make_finding("WF905", "main.py", 30, "overwrite", {"array": "vx"})
    before = _report([1.0], [GRAD], findings=[tracker])
    ok, why = judge(before, _report([1.0], [wrong]), ["WF105"])
    assert ok and "FD cannot tell which is right: the runtime integrity check decided: WF905 before" in why, why
    ok, why = judge(before, _report([1.0], [wrong]), ["WF201"])  # not an overwrite fix: nothing proves it
    assert not ok


def test_an_edit_that_now_passes_fd_is_kept_whatever_its_gradient() -> None:
    before = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:40", 1.0, [_param(0.5 * GRAD, "fail")])]))
    ok, why = judge(before, _report([1.0], [GRAD]), ["WF105"])
    assert ok and why == "loss unchanged; FD agreement now passes"


_SIX = [9.0] * 6  # a step taken inside the tape: the probe sees no parameter update for six backwards


@pytest.mark.parametrize(
    ("later", "kept", "why"),
    [
        # cloth, step-into-taped-method (WF302 + WF106): kept before on the 2 backwards both runs have
        ([], False, "FD checked no backward after it"),
        (["pass", "fail"], False, "FD still disagrees after the edit"),
        (["unreliable"], False, "FD is unreliable here after the edit"),
        (["pass", "pass"], True, "and FD agreed at each of the 2 backward(s) checked after it"),
    ],
)
def test_an_edit_that_moves_the_first_update_is_judged_on_the_backwards_after_it(
    later: list[str], kept: bool, why: str
) -> None:
    """The losses after the moved update legitimately differ (the run before trained on another gradient);
    every backward FD checked after it must pass on its own."""
    before = fd_summary(VerifyReport(backwards=[BackwardResult(f"main.py:{40 + i}", 9.0, [_param(GRAD, "fail")])
                                                for i in range(6)]))
    ok, reason = judge(before, _report([9.0, 9.0], [GRAD, GRAD], later=later), ["WF302", "WF106"])
    assert ok is kept and why in reason, reason
    assert before["losses"] == _SIX


@pytest.mark.parametrize(("later", "kept"), [([], False), (["pass"], True)])
def test_a_step_moved_after_the_backward_is_judged_on_a_backward_after_the_update(later: list[str],
                                                                                   kept: bool) -> None:
    """cloth, step-into-taped-method: the WF302 edit left the one checked backward (the verifier's window ends
    there) unchanged, so it was kept as harmless; what it changes is what the update consumes, and the recorder
    then showed the program not training (loss 271.56 at all 4 backwards; the original's fall to 146.67)."""
    before = _report([271.56], [GRAD])
    ok, why = judge(before, _report([271.56], [GRAD], later=later), ["WF302"])
    assert ok is kept, why
    if kept:
        assert why == ("loss unchanged and FD agreed at the 1 backward(s) checked after the first parameter update; "
                       "FD agreed before and after, and the edit left the 1 checked gradient(s) unchanged")
    else:
        assert "FD checked no backward after the first update" in why


def test_the_losses_before_a_moved_update_must_still_match() -> None:
    before = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:40", 9.0, [_param(GRAD, "fail")])] * 6))
    ok, why = judge(before, _report([9.0, 9.25], [GRAD, GRAD], later=["pass"]), ["WF302"])
    assert not ok and "the loss changed at backward 2" in why


@pytest.mark.slow
def test_real_verifier_proves_a_wf201_edit_fd_accepts_either_way_by_the_cut_chain(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mechanism of the fluid_checkpoint_cb keep, on a small program: the path through `b` (no
    requires_grad) carries 0.25% of the gradient, below FD's tolerance, so FD passes before and after the
    WF201 edit while the edit changes the gradient of `p`. FD cannot tell which is right; the runtime
    cut-chain check can: before the edit `b` cuts the chain p -> b -> loss, after it nothing does."""
    import shutil
    import sys
    from pathlib import Path

    from warpfix.apply import Selection, check_fixes

    shutil.copy(Path(__file__).parent / "verify_programs" / "fd_blind_requires_grad.py", tmp_path / "main.py")
    monkeypatch.chdir(tmp_path)
    result = check_fixes(["."], [sys.executable, "main.py"], selection=Selection(select=["WF201"], use_cache=False))
    assert result.errors == []
    [edit] = result.edits
    assert edit.fd_before["integrity_arrays"] == ["WF201 b"] and edit.fd_after["integrity_arrays"] == []
    assert (edit.fd_before["verdict"], edit.fd_after["verdict"]) == ("fail", "pass")  # failed by the finding alone
    assert edit.kept, edit.reason
    assert "the runtime checks decided: the edit removed WF201 b and added none" in edit.reason
    assert "b = wp.zeros(N, dtype=float, requires_grad=True)" in result.changed["main.py"]


def _unreliable(losses: list[float], findings=(), later_losses: list[float] = ()) -> dict:
    """fd_summary of a run FD cannot judge (a NaN-prone solve, chaos): every verdict unreliable."""
    backwards = [BackwardResult(f"main.py:{40 + i}", loss, [_param(GRAD, "unreliable")]) for i, loss in enumerate(losses)]
    backwards += [BackwardResult("main.py:40", loss, [_param(GRAD, "unreliable")], window=1) for loss in later_losses]
    return fd_summary(VerifyReport(backwards=backwards, findings=list(findings)))


CUT = make_finding("WF201", "main.py", 12, "`b` has no gradient", {"runtime": "cut-chain", "array": "b", "family": "b"})
OTHER_CUT = make_finding("WF201", "main.py", 14, "`c` has no gradient", {"runtime": "cut-chain", "array": "c", "family": "c"})


def test_a_wf201_fix_fd_cannot_judge_is_proven_by_the_cut_chain_going_away() -> None:
    before = _unreliable([1.0], [CUT])
    assert before["verdict"] == "fail" and before["integrity_arrays"] == ["WF201 b"]
    ok, why = judge(before, _unreliable([1.0]), ["WF201"])
    assert ok and "FD is unreliable here, so the runtime checks decided: the edit removed WF201 b" in why, why
    # the cut still there, or another one appearing: no proof
    assert not judge(before, _unreliable([1.0], [CUT]), ["WF201"])[0]
    assert not judge(before, _unreliable([1.0], [OTHER_CUT]), ["WF201"])[0]
    # the cut-chain check proves only the WF201 fix, and no fix that changes the forward
    assert not judge(before, _unreliable([1.0]), ["WF105"])[0]
    assert not judge(before, _unreliable([1.5]), ["WF201"])[0]


EARLY = make_finding("WF302", "main.py", 33, "reads `v.grad` inside the tape", {"runtime": "early-grad", "array": "v"})


def test_a_step_fix_fd_cannot_judge_is_proven_by_the_early_read_going_away_when_the_update_trains() -> None:
    before = _unreliable([2.0], [EARLY], later_losses=[1.9])
    ok, why = judge(before, _unreliable([2.0], later_losses=[1.8]), ["WF302"])
    assert ok and "the runtime checks decided: the edit removed WF302 v" in why, why
    # the read moved past the zeroing of the gradient: the update changes nothing, the loss stays
    assert not judge(before, _unreliable([2.0], later_losses=[2.0]), ["WF302"])[0]
    assert not judge(before, _unreliable([2.0]), ["WF302"])[0]  # no backward after the update: nothing shows it


def test_an_edit_that_moved_the_first_update_is_proven_only_by_the_early_read_check() -> None:
    """Six backwards before the first update (the step inside the tape), one after the edit: the overwrite
    check going clean says nothing of the moved update; the early read going away does."""
    tracker = make_finding("WF905", "main.py", 30, "overwrite", {"array": "v"})
    before = _unreliable(_SIX, [EARLY, tracker], later_losses=[8.0])
    ok, why = judge(before, _unreliable([9.0], later_losses=[8.5]), ["WF302"])
    assert ok and "removed WF302 v" in why, why
    assert not judge(_unreliable(_SIX, [tracker], later_losses=[8.0]), _unreliable([9.0], later_losses=[8.5]),
                     ["WF302", "WF106"])[0]


def _checkpoint_run(seeds: list[float], grads: list[np.ndarray], verdicts: list[str], findings=()) -> dict:
    """fd_summary of a checkpointed program (fluid_checkpoint): one backward per segment in window 0, the
    first seeded through ``loss.grad``, the others with the gradients the next segment handed on; FD
    fails where the program's own custom adjoint disagrees with it."""
    backwards = [BackwardResult("main.py:441", seed, [_param(g, v)], objective="sum(seed * output) of the "
                                "gradients seeded by hand") for seed, g, v in zip(seeds, grads, verdicts, strict=True)]
    return fd_summary(VerifyReport(backwards=backwards, findings=list(findings)))


_LEFTOVER = make_finding("WF903", "main.py", 445, "`vx.grad` read here holds ... summed", {"array": "vx"},
                         classified_as="WF301")


def test_a_missing_zero_fix_where_fd_already_failed_is_judged_like_with_like() -> None:
    """fluid_checkpoint without a segment's ``tape.zero()``: FD disagrees with the program's own custom
    adjoint on the unedited program too. The hand-seeded objectives after the first backward differ between
    the runs (the mutant seeds each segment with summed gradients: 0.41 instead of 0.21 at backward 3), so
    neither their values nor their gradients are compared; the first backward's gradient is unchanged, still
    failing as before, and the leftover gradient (WF903 at its consuming read) is gone: kept."""
    before = _checkpoint_run([0.2063, 0.2063, 0.4126], [GRAD, 2 * GRAD, 3 * GRAD], ["fail", "fail", "fail"],
                             [_LEFTOVER])
    after = _checkpoint_run([0.2063, 0.2063, 0.2063], [GRAD, GRAD, GRAD], ["fail", "fail", "pass"])
    assert before["seeded"] == [False, True, True]
    ok, why = judge(before, after, ["WF301"])
    assert ok, why
    assert why.startswith("loss unchanged (2 objective(s) seeded by hand after the first backward not compared)")
    assert "FD disagreed before the edit too, at backward(s) 1, on gradients the edit left unchanged" in why
    assert "removed WF903 vx" in why


@pytest.mark.parametrize("after_grads, after_verdicts, findings, why", [
    # a zero that also cleared the first backward's gradient: the like-for-like gradient changed
    ([0.5 * GRAD, GRAD, GRAD], ["fail", "fail", "fail"], (), "at backward 1, on a gradient the edit changed"),
    # the leftover is still consumed
    ([GRAD, GRAD, GRAD], ["fail", "fail", "fail"], (_LEFTOVER,), "FD still disagrees after the edit"),
])  # fmt: skip
def test_a_wrong_missing_zero_fix_where_fd_already_failed_is_refused(after_grads, after_verdicts, findings,
                                                                     why: str) -> None:
    before = _checkpoint_run([0.2063, 0.2063, 0.4126], [GRAD, 2 * GRAD, 3 * GRAD], ["fail", "fail", "fail"],
                             [_LEFTOVER])
    ok, reason = judge(before, _checkpoint_run([0.2063] * 3, after_grads, after_verdicts, findings), ["WF301"])
    assert not ok
    assert why in reason, reason


def test_where_fd_passed_at_the_first_backward_and_fails_after_the_edit_is_refused() -> None:
    before = _checkpoint_run([0.2063, 0.4126], [GRAD, 2 * GRAD], ["pass", "fail"], [_LEFTOVER])
    ok, reason = judge(before, _checkpoint_run([0.2063] * 2, [GRAD, GRAD], ["fail", "fail"]), ["WF301"])
    assert not ok
    assert "at backward 1 where it agreed before" in reason


def test_a_run_whose_backwards_reach_no_leaf_could_not_be_judged_and_an_edit_may_mend_it() -> None:
    """navier_stokes, per-frame-tape (WF601): the last frame's tape, the one backward-ed, reads no parameter,
    so verify gives no verdict on the buggy program; apply --check refused every edit ("cannot verify the
    original program"). FD agreeing after the one-tape fix is the proof; a crash stays an error."""
    no_leaf = VerifyReport(backwards=[BackwardResult("main.py:40", 2.5, [])],
                           error="no backward had a leaf parameter to compare: main.py:40: no leaf parameter")
    before = fd_summary(no_leaf)
    assert before["verdict"] == "none" and before["losses"] == [2.5]
    ok, why = judge(before, _report([2.5], [GRAD]), ["WF601"])
    assert ok and "now passes" in why
    assert not judge(before, _report([2.75], [GRAD]), ["WF601"])[0]
    crashed = VerifyReport(backwards=[BackwardResult("main.py:40", 2.5, [])], error="the program exited with status 1")
    assert fd_summary(crashed)["verdict"] == "error"


TRUNCATED = make_finding("WF601", "main.py", 28, "the launch of kernel step writes `x`, recorded on another tape",
                         {"runtime": "tape-cover", "array": "x", "family": "launch of kernel step"}, classified_as="WF601")


def test_a_wf601_hoist_fd_cannot_judge_is_proven_by_the_tape_covering_the_objective() -> None:
    """navier_stokes per-frame-tape: the hoisted program is chaotic (FD unreliable after the edit: 1 of 6
    perturbations agree), so FD cannot prove the hoist; the runtime WF601 going from a truncated objective
    (a launch the loss depends on, recorded on a discarded tape) to clean does, the loss unchanged."""
    before = _unreliable([1.0], [TRUNCATED])
    assert before["verdict"] == "fail" and before["integrity_arrays"] == ["WF601 launch of kernel step"]
    ok, why = judge(before, _unreliable([1.0]), ["WF601"])
    assert ok and ("FD is unreliable here, so the runtime checks decided: the edit removed WF601 launch of kernel "
                   "step and added none") in why, why
    # per-window backwards merged into one: their total loss is the forward compared
    ok, why = judge(_unreliable([0.25, 0.75], [TRUNCATED]), _unreliable([1.0]), ["WF601"])
    assert ok and "total loss of 2 -> 1 backwards unchanged" in why, why
    assert not judge(before, _unreliable([1.0], [TRUNCATED]), ["WF601"])[0]  # still truncated
    assert not judge(before, _unreliable([1.25]), ["WF601"])[0]  # the forward changed
    assert not judge(before, _unreliable([1.0]), ["WF201"])[0]  # it proves the hoist, no other fix
    # the mutant itself: the one tape backward-ed reads no parameter, so FD had no verdict before the edit either
    no_leaf = fd_summary(VerifyReport(backwards=[BackwardResult("main.py:40", 1.0, [])], findings=[TRUNCATED],
                                      error="no backward had a leaf parameter to compare: main.py:40: no leaf"))
    ok, why = judge(no_leaf, _unreliable([1.0]), ["WF601"])
    assert ok and "the runtime checks decided" in why, why


def test_an_overwrite_fix_that_leaves_fewer_backwards_before_the_update_moved_no_update() -> None:
    """newton cloth with its states aliased (`[state] * n`): the parameter the program updates is overwritten on
    the tape, so the verifier saw no end of iteration (2 backwards, the second NaN); after the WF103 fix it sees
    1. A WF103 fix moves no optimizer step: the backward both runs have matches and the integrity check decides."""
    tracker = make_finding("WF905", "main.py", 30, "overwrite", {"array": "v"})
    before = _unreliable([271.5, math.nan], [tracker])
    ok, why = judge(before, _unreliable([271.5]), ["WF103"])
    assert ok and "a WF103 fix moves no optimizer step" in why and "runtime integrity check decided" in why, why
    assert not judge(before, _unreliable([271.6]), ["WF103"])[0]  # the backward both have must match
    assert not judge(before, _unreliable([271.5]), ["WF302"])[0]  # a step fix: judged as a moved update
