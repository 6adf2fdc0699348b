"""``warpfix apply --check``: edits are kept only when the verifier proves them (fake verifier here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.test_apply import BUGGY, FIXED
from warpfix.apply import CHECK_FD_FLOOR_S, Selection, check_fixes, judge
from warpfix.verify.fd import FD_BUDGET_S
from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport
from warpfix.verify.sketch import sketch


def _grad(text: str) -> list[float]:
    """The fake's gradient of ``k``: wrong while the kernel multiplies in place, the same whatever else changed."""
    return [0.5, 2.0] if "v[i] *= k[0]" in text else [1.0, 2.0]


class FakeVerify:
    """FD fails while the kernel still multiplies in place; the loss is whatever ``loss_of`` says, the
    gradient whatever ``grad_of`` says."""

    def __init__(self, loss_of=lambda text: 12.47, error: str | None = None, grad_of=_grad) -> None:
        self.loss_of = loss_of
        self.grad_of = grad_of
        self.error = error
        self.calls: list[tuple[list[str], str]] = []

    def __call__(self, cmd: list[str], *, cwd: str, device: str | None = None, timeout: float = 120.0,
                 fd_floor: float | None = None, **gradients: str | None):
        self.calls.append((cmd, cwd))
        if self.error:
            return VerifyReport(error=self.error)
        text = (Path(cwd) / "main.py").read_text(encoding="utf-8")
        buggy = "v[i] *= k[0]" in text
        param = ParamResult("k", "fail" if buggy else "pass", "dense" if buggy else "", 0.5 if buggy else 1e-4, None,
                            ad_sketch=sketch(np.array(self.grad_of(text))))
        return VerifyReport(backwards=[BackwardResult("main.py:23", self.loss_of(text), [param])])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "main.py").write_text(BUGGY, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_proven_edit_is_kept(project: Path) -> None:
    verify = FakeVerify()
    result = check_fixes(["."], ["python", "main.py"], selection=Selection(use_cache=False), verify=verify)
    assert result.errors == []
    edits = {e.finding.rule: e for e in result.edits}
    assert edits["WF401"].kept and edits["WF401"].reason == "loss unchanged; FD agreement now passes"
    assert edits["WF401"].fd_before["verdict"] == "fail" and edits["WF401"].fd_after["verdict"] == "pass"
    assert edits["WF702"].kept  # FD already passed with WF401 fixed, and the gradient did not change
    assert edits["WF702"].reason == ("loss unchanged; FD agreed before and after, and the edit left the 1 "
                                     "checked gradient(s) unchanged")
    assert result.changed == {"main.py": FIXED}
    assert all(cwd != str(project) for _, cwd in verify.calls)  # only scratch copies ran
    assert (project / "main.py").read_text(encoding="utf-8") == BUGGY  # nothing written here


def test_edit_that_changes_a_gradient_fd_accepts_either_way_is_dropped(project: Path) -> None:
    """Issue 10 (fluid_checkpoint_cb, zero-read): FD passed before and after the WF702 edit while the edit
    changed the gradient; FD then cannot tell which gradient is right, so that is no proof."""
    verify = FakeVerify(grad_of=lambda text: [*_grad(text)[:1], 2.0 if "wp.sqrt" in text else 2.5])
    result = check_fixes(["."], ["python", "main.py"], selection=Selection(use_cache=False), verify=verify)
    edits = {e.finding.rule: e for e in result.edits}
    assert edits["WF401"].kept
    assert not edits["WF702"].kept
    assert edits["WF702"].reason.startswith("FD agreed before and after, but the edit changed the gradient of `k` "
                                            "at backward 1 (moved by ")
    assert "wp.sqrt" in result.changed["main.py"]


def test_edit_that_changes_the_loss_is_dropped(project: Path) -> None:
    verify = FakeVerify(loss_of=lambda text: 12.47 if "v[i] *= k[0]" in text else 11.0)
    result = check_fixes(["."], ["python", "main.py"], selection=Selection(use_cache=False), verify=verify)
    wf401 = next(e for e in result.edits if e.finding.rule == "WF401")
    assert not wf401.kept and "the loss changed" in wf401.reason
    assert "v[i] *= k[0]" in result.changed.get("main.py", BUGGY)


def test_apply_check_gives_the_verifier_its_own_fd_floor(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdicts decide which edits are kept: each run's FD may take CHECK_FD_FLOOR_S, not verify's 10 s."""
    floors: list[float | None] = []
    saved: list[tuple] = []

    def run_verify(cmd, *, cwd, device=None, timeout=120.0, fd_floor=None, save_gradients=None,
                   against_gradients=None):
        floors.append(fd_floor)
        saved.append((save_gradients, against_gradients))
        return VerifyReport(error="stop here")

    monkeypatch.setattr("warpfix.verify.run_verify", run_verify)
    check_fixes(["."], ["python", "main.py"], selection=Selection(use_cache=False))
    assert floors == [CHECK_FD_FLOOR_S] and CHECK_FD_FLOOR_S > FD_BUDGET_S
    # the original's run saves its gradients (FD along what an edit changes measures against them)
    assert saved[0][0] is not None and saved[0][1] is None


def test_unverifiable_original_is_an_error(project: Path) -> None:
    result = check_fixes(["."], ["python", "main.py"], selection=Selection(use_cache=False),
                         verify=FakeVerify(error="no tape.backward was reached"))
    assert result.errors == ["cannot verify the original program: no tape.backward was reached"]
    assert result.changed == {}


def test_cli_check_writes_only_proven_files(project: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    import warpfix.verify

    monkeypatch.setattr(warpfix.verify, "run_verify", FakeVerify())
    from warpfix.cli import main

    assert main(["apply", "--no-cache", "--format", "json", "--check", ".", "--", "python", "main.py"]) == 1
    data = json.loads(capsys.readouterr().out)
    wf401 = next(e for e in data["edits"] if e["rule"] == "WF401")
    assert wf401["kept"] and wf401["fd_before"]["verdict"] == "fail" and wf401["fd_after"]["verdict"] == "pass"
    assert (project / "main.py").read_text(encoding="utf-8") == FIXED


@pytest.mark.parametrize(
    ("before", "after", "kept", "why"),
    [
        ({"verdict": "fail", "losses": [1.0]}, {"verdict": "pass", "losses": [1.0 + 1e-6]}, True, "now passes"),
        ({"verdict": "fail", "losses": [1.0]}, {"verdict": "fail", "losses": [1.0]}, False, "still disagrees"),
        ({"verdict": "fail", "losses": [1.0]}, {"verdict": "pass", "losses": [1.1]}, False, "loss changed"),
        ({"verdict": "fail", "losses": [1.0]}, {"verdict": "pass", "losses": [1.0, 2.0]}, False, "total loss"),
        ({"verdict": "fail", "losses": [1.5, 2.5]}, {"verdict": "pass", "losses": [4.0]}, True, "2 -> 1 backwards"),
        ({"verdict": "fail", "losses": [None]}, {"verdict": "pass", "losses": [1.0]}, False, "no loss value"),
        ({"verdict": "fail", "losses": [1.0]}, {"verdict": "error", "error": "crash", "losses": []}, False, "crash"),
        ({"verdict": "pass", "losses": [1.0]}, {"verdict": "unreliable", "losses": [1.0]}, False, "unreliable"),
    ],
)
def test_judge(before: dict, after: dict, kept: bool, why: str) -> None:
    ok, reason = judge(before, after)
    assert ok is kept and why in reason


@pytest.mark.parametrize(
    ("after", "rules", "kept", "why"),
    [
        # an optimizer step moved out of the tape: the program trains now, its first iteration ends sooner
        ({"verdict": "pass", "losses": [9.0, 9.0], "later": ["pass"]}, ["WF302"], True,
         "loss unchanged at the 2 backward(s) before the first parameter update"),
        ({"verdict": "pass", "losses": [9.0, 9.5]}, ["WF302"], False, "loss changed at backward 2"),
        ({"verdict": "pass", "losses": []}, ["WF302"], False, "none to compare"),
        # more backwards before the first update: a parameter rebound away from its optimizer (WF105 on drone)
        ({"verdict": "pass", "losses": [9.0] * 8}, ["WF105"], False, "delays or removes the first parameter update"),
        ({"verdict": "fail", "losses": [9.0]}, ["WF302", "WF304"], False, "still disagrees"),
        # the WF601 hoist merges the windows' backwards: judged on the total
        ({"verdict": "pass", "losses": [54.0]}, ["WF601"], True, "total loss of 6 -> 1"),
        ({"verdict": "pass", "losses": [9.0, 9.0]}, ["WF601", "WF302"], False, "total loss"),
        # a hand-seeded running sum (the drone's costs) is not summed: its last value is the iteration's
        ({"verdict": "pass", "losses": [9.0]}, ["WF601"], False, "total loss"),
    ],
)
def test_judge_compares_like_with_like_when_the_backwards_differ(after: dict, rules: list, kept: bool,
                                                                why: str) -> None:
    """Issue 10 (WF302 regression): a fix that ends the first iteration earlier is judged on the
    backwards both runs have, not on a total over unlike runs; only merging fixes use the total."""
    ok, reason = judge({"verdict": "fail", "losses": [9.0] * 6}, after, rules)
    assert ok is kept and why in reason, reason


@pytest.mark.parametrize(
    ("seeded", "after", "kept", "why"),
    [
        ([False, True, True], [6.0], True, "seeded by hand that 3 backwards added into unchanged at the last"),
        ([False, True, True], [6.5], False, "total loss"),
        ([False, False, True], [6.0], False, "total loss"),  # one backward has a loss of its own: summed
    ],
)
def test_a_merged_running_sum_seeded_by_hand_is_judged_on_its_last_value(seeded: list, after: list, kept: bool,
                                                                         why: str) -> None:
    """drone, per-window-backward (WF601): each window adds its costs into one array and seeds the backward
    through its .grad, so the backwards see 1, 3, 6; the fix's one backward sees 6, not their sum 10."""
    before = {"verdict": "fail", "losses": [1.0, 3.0, 6.0], "seeded": seeded}
    ok, reason = judge(before, {"verdict": "pass", "losses": after}, ["WF601"])
    assert ok is kept and why in reason, reason


_CHAOS_BEFORE = {"verdict": "fail", "losses": [3.0], "runtime_findings": ["WF902"], "integrity": ["WF902", "WF905"]}


@pytest.mark.parametrize(
    ("after", "rules", "kept", "why"),
    [
        ({"verdict": "unreliable", "losses": [3.0], "integrity": []}, ["WF104"], True,
         "WF902, WF905 before the edit, clean after"),
        ({"verdict": "unreliable", "losses": [3.0], "integrity": ["WF905"]}, ["WF104"], False, "unreliable"),
        ({"verdict": "unreliable", "losses": [3.5], "integrity": []}, ["WF104"], False, "loss changed"),
        ({"verdict": "unreliable", "losses": [3.0], "integrity": []}, ["WF702"], False, "unreliable"),
        ({"verdict": "unreliable", "losses": [3.0], "integrity": []}, ["WF104", "WF702"], False, "unreliable"),
        ({"verdict": "fail", "losses": [3.0], "integrity": ["WF902"]}, ["WF104"], False, "WF902: a recorded array"),
    ],
)
def test_judge_by_the_integrity_check_where_fd_cannot(after: dict, rules: list, kept: bool, why: str) -> None:
    """Issue 10: a correct overwrite fix of a chaotic program (FD unreliable) is proven by WF902/WF905
    going from failing to clean with the loss unchanged; any other edit still needs FD."""
    ok, reason = judge(_CHAOS_BEFORE, after, rules)
    assert ok is kept and why in reason, reason


_OWN_OVERWRITE_BEFORE = {"verdict": "unreliable", "losses": [3.0], "integrity": ["WF902", "WF905"],
                         "integrity_arrays": ["WF902 u", "WF905 clamp(x)"]}


@pytest.mark.parametrize(
    ("after", "kept", "why"),
    [
        ({"integrity": ["WF902"], "integrity_arrays": ["WF902 u"]}, True, "removed WF905 clamp(x) and added none"),
        ({"integrity": ["WF902"], "integrity_arrays": ["WF902 u", "WF902 x_out"]}, False, "unreliable"),
        ({"integrity": ["WF902", "WF905"], "integrity_arrays": ["WF902 u", "WF905 clamp(x)"]}, False, "unreliable"),
        ({"integrity": ["WF902"], "integrity_arrays": ["WF902 u"], "losses": [3.5]}, False, "loss changed"),
        ({"integrity": ["WF902"], "integrity_arrays": ["WF902 u"], "runtime_findings": ["WF903"]}, False,
         "unreliable"),
    ],
)
def test_judge_by_the_arrays_the_integrity_check_names(after: dict, kept: bool, why: str) -> None:
    """A program that overwrites a recorded array on purpose (warp.fem under its own adjoint) keeps that
    integrity finding: an overwrite fix is proven where FD cannot judge when it removes the findings about
    other arrays and adds none, with the loss unchanged."""
    ok, reason = judge(_OWN_OVERWRITE_BEFORE, {"verdict": "unreliable", "losses": [3.0], **after}, ["WF106"])
    assert ok is kept and why in reason, reason
    ok, reason = judge(_OWN_OVERWRITE_BEFORE, {"verdict": "unreliable", "losses": [3.0], **after}, ["WF201"])
    assert not ok  # not an overwrite fix: FD must judge it


def test_the_integrity_key_tells_the_overwrite_an_edit_removed_from_the_programs_own_of_the_same_family() -> None:
    """navier_stokes (a held-out mutant of the mutation bench): its FFT overwrites ``psi`` on purpose, and the
    planted ``psi.zero_()`` after the stage that read it overwrites it too. The fresh-array fix removes the
    zero; the runtime check must still tell that one apart, or the chaotic program's fix is never proven."""
    from warpfix.run_summary import fd_summary
    from warpfix.verify.report import make_finding

    def run(*ops: tuple[str, str]) -> dict:
        findings = [make_finding("WF902", "main.py", 618, "overwrite", {"family": "psi", "writer": w, "read_by": r})
                    for w, r in ops]
        return {**fd_summary(VerifyReport(backwards=[], findings=findings)), "verdict": "unreliable", "losses": [3.0]}

    own = ("array.zero_", "launch of kernel fft_tiled")  # the Poisson solve's own reset, read by its own FFT
    planted = ("array.zero_", "launch of kernel rk3_substep")
    before, after = run(own, planted), run(own)
    assert before["integrity_arrays"] == ["WF902 psi by the array.zero_ after the launch of kernel fft_tiled",
                                          "WF902 psi by the array.zero_ after the launch of kernel rk3_substep"]
    ok, why = judge(before, after, ["WF105"])
    assert ok and "removed WF902 psi by the array.zero_ after the launch of kernel rk3_substep and added none" in why, why


@pytest.mark.parametrize(
    ("after", "rules", "kept"),
    [
        (["WF902 u"], ["WF301"], True),  # the stale gradient is gone; the program's own overwrite stays
        (["WF902 u", "WF903 x"], ["WF301"], False),
        (["WF902 u"], ["WF105"], False),  # WF903 observes a missing zero, not an overwrite
        (["WF902 u"], ["WF301", "WF105"], False),
    ],
)
def test_a_missing_zero_fix_is_judged_by_the_stale_gradient_check(after: list, rules: list, kept: bool) -> None:
    """WF903 (a gradient already non-zero when the next backward starts) proves a WF301 fix where FD cannot."""
    before = {"verdict": "fail", "losses": [3.0], "runtime_findings": ["WF903"], "integrity": ["WF902"],
              "integrity_arrays": ["WF902 u", "WF903 x"]}
    integrity = sorted({k.split()[0] for k in after if k.split()[0] in ("WF902", "WF905")})
    ok, reason = judge(before, {"verdict": "unreliable", "losses": [3.0], "integrity": integrity,
                                "integrity_arrays": after}, rules)
    assert ok is kept, reason
    if kept:
        assert reason.endswith("the runtime checks decided: the edit removed WF903 x and added none")


@pytest.mark.slow
@pytest.mark.parametrize("case", ["WF106-kernel-rmw", "WF702-singular-point"])
def test_real_verifier_proves_golden_fix(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import sys

    from tests.conftest import REPO

    golden = REPO / "golden" / case
    rule = json.loads((golden / "case.json").read_text(encoding="utf-8"))["rule"]
    shutil.copytree(golden / "buggy", tmp_path / "buggy")
    monkeypatch.chdir(tmp_path / "buggy")
    result = check_fixes(["."], [sys.executable, "main.py"], selection=Selection(select=[rule], use_cache=False))
    assert result.errors == []
    [edit] = result.edits
    assert edit.kept, edit.reason
    assert (edit.fd_before["verdict"], edit.fd_after["verdict"]) == ("fail", "pass")
    assert result.changed == {"main.py": (golden / "fixed" / "main.py").read_text(encoding="utf-8")}


@pytest.mark.slow
def test_real_verifier_proves_a_chaotic_overwrite_fix_by_the_integrity_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The logistic map at r = 3.9: FD is unreliable after the (correct) ping-pong fix, but WF902/WF905
    go from failing to clean with the loss unchanged, so the edit is kept and the reason says why."""
    import shutil
    import sys

    from tests.conftest import REPO

    golden = REPO / "golden" / "WF104-chaotic-ping-pong"
    shutil.copytree(golden / "buggy", tmp_path / "buggy")
    monkeypatch.chdir(tmp_path / "buggy")
    result = check_fixes(["."], [sys.executable, "main.py"], selection=Selection(select=["WF104"], use_cache=False))
    assert result.errors == []
    [edit] = result.edits
    assert edit.kept, edit.reason
    assert edit.fd_after["verdict"] == "unreliable" and "runtime integrity check" in edit.reason
    assert result.changed == {"main.py": (golden / "fixed" / "main.py").read_text(encoding="utf-8")}


@pytest.mark.slow
def test_real_verifier_proves_a_chaotic_wf201_fix_by_the_cut_chain_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class-based trainer of the logistic map (FD unreliable on both sides) whose rate buffer, allocated in
    __init__, lacks requires_grad: the runtime cut-chain finding goes away with the loss unchanged, so the
    WF201 edit is kept and the reason says why."""
    import shutil
    import sys

    from tests.conftest import REPO

    golden = REPO / "golden" / "WF201-chaotic-class-buffer"
    shutil.copytree(golden / "buggy", tmp_path / "buggy")
    monkeypatch.chdir(tmp_path / "buggy")
    result = check_fixes(["."], [sys.executable, "main.py"], selection=Selection(select=["WF201"], use_cache=False))
    assert result.errors == []
    [edit] = result.edits
    assert edit.kept, edit.reason
    assert edit.fd_after["verdict"] == "unreliable" and "removed WF201 self.r and added none" in edit.reason
    assert result.changed == {"main.py": (golden / "fixed" / "main.py").read_text(encoding="utf-8")}


TWO_BUGS = BUGGY.replace(
    "    wp.atomic_add(loss, 0, wp.sqrt(wp.dot(v[i], v[i])))\n",
    "    wp.atomic_add(loss, 0, wp.sqrt(wp.dot(v[i], v[i])))\n\n\n"
    "@wp.kernel\ndef scale(w: wp.array(dtype=float), k: wp.array(dtype=float)):\n    i = wp.tid()\n    w[i] *= k[0]\n",
).replace(
    "    wp.launch(damp, dim=8, inputs=[v, k])\n",
    "    wp.launch(damp, dim=8, inputs=[v, k])\n    wp.launch(scale, dim=4, inputs=[u, k])\n",
).replace("tape = wp.Tape()\n", "u = wp.ones(4, dtype=float, requires_grad=True)\ntape = wp.Tape()\n")


class FakeVerifyBoth(FakeVerify):
    """FD passes only once neither kernel multiplies in place (the two bugs mask each other)."""

    def __call__(self, cmd: list[str], *, cwd: str, device: str | None = None, timeout: float = 120.0,
                 fd_floor: float | None = None, **gradients: str | None):
        self.calls.append((cmd, cwd))
        text = (Path(cwd) / "main.py").read_text(encoding="utf-8")
        buggy = "v[i] *= k[0]" in text or "w[i] *= k[0]" in text
        param = ParamResult("k", "fail" if buggy else "pass", "dense" if buggy else "", 0.5 if buggy else 1e-4, None)
        return VerifyReport(backwards=[BackwardResult("main.py:23", 12.47, [param])])


def test_findings_of_one_rule_in_one_file_are_judged_together_first(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "main.py").write_text(TWO_BUGS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    verify = FakeVerifyBoth()
    result = check_fixes(["."], ["python", "main.py"], selection=Selection(select=["WF401"], use_cache=False),
                         verify=verify)
    assert result.errors == []
    assert [(e.finding.rule, e.kept) for e in result.edits] == [("WF401", True), ("WF401", True)]
    assert all("judged together with the 1 other WF401" in e.reason for e in result.edits)
    assert len(verify.calls) == 2  # the original, then both edits at once (not 2 alone + 1 together)


@pytest.mark.slow
def test_a_fix_fd_accepts_either_way_is_proven_along_the_change(tmp_path: Path) -> None:
    """Blind corpus 3's hammock_struct: the drag updated in place (WF107) moves the gradient by 0.2% of its norm;
    FD passes before and after, and FD along the direction the edit moved it sides with the edit."""
    import shutil
    import sys

    src = Path(__file__).resolve().parents[1] / "bench" / "blind_corpus3" / "hammock_struct" / "bug_inplace_drag.py"
    shutil.copy(src, tmp_path / "main.py")
    result = check_fixes([str(tmp_path / "main.py")], [sys.executable, "main.py"], root=str(tmp_path),
                         selection=Selection(use_cache=False))
    [edit] = [e for e in result.edits if e.finding.rule == "WF107"]
    assert edit.kept, edit.reason
    assert "FD along the direction the edit moved the gradient agrees with the edit's gradient" in edit.reason
