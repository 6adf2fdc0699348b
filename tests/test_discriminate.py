"""FD along the direction an edit moved a gradient (``warpfix.verify.discriminate``), the proof ``apply --check``
takes where FD accepts the gradients before and after an edit: the decision on measured FD values, and the
verdict :func:`warpfix.acceptance.judge` draws from it."""

from __future__ import annotations

import numpy as np

from warpfix.acceptance import judge
from warpfix.run_summary import fd_summary
from warpfix.verify.discriminate import Gradients, decide, verdict_of
from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport
from warpfix.verify.sketch import sketch

#: measured on blind corpus 3's hammock_struct (the in-place drag made out-of-place): FD along the change at the
#: step sizes 1e-2 .. 1e-4, the edit's directional derivative and the original's
HAMMOCK_FD = [-0.11570361680634018, -0.12236351837733729, -0.12299674041497179, -0.1230684737864039,
              -0.12307816363395528]
AFTER, BEFORE = -0.12307636604190265, -0.12318542497962105


def test_fd_settling_on_the_edits_derivative_confirms_it() -> None:
    assert decide(HAMMOCK_FD, AFTER, BEFORE)["verdict"] == "after"
    assert decide(HAMMOCK_FD, BEFORE, AFTER)["verdict"] == "before"  # the edit undone: FD sides with the original


def test_one_step_size_or_scattered_fd_decides_nothing() -> None:
    assert decide(HAMMOCK_FD[:4], AFTER, BEFORE)["verdict"] == "unresolved"  # only 3e-4 sides clearly
    noisy = [AFTER + 1e-6, BEFORE - 1e-6, AFTER - 1e-6, float("nan")]
    assert decide(noisy, AFTER, BEFORE)["verdict"] == "unresolved"


def _run(grad: np.ndarray, discriminate: dict | None = None) -> dict:
    param = ParamResult("log_ke", "pass", "", 1e-3, 1.0, ad_sketch=sketch(grad), discriminate=discriminate)
    return fd_summary(VerifyReport(backwards=[BackwardResult("main.py:40", 0.037, [param])]))


def test_judge_keeps_a_changed_gradient_only_when_fd_along_the_change_confirms_it() -> None:
    before = np.linspace(-1.0, 1.0, 72)
    moved = before.copy()
    moved[:36] *= 1.002  # 0.1% of the norm: FD passes on both sides
    assert judge(_run(before), _run(moved), ["WF107"])[0] is False  # no proof which one is right
    ok, why = judge(_run(before), _run(moved, decide(HAMMOCK_FD, AFTER, BEFORE)), ["WF107"])
    assert ok and "agrees with the edit's gradient at 2 of 5 step sizes" in why
    ok, why = judge(_run(before), _run(moved, decide(HAMMOCK_FD, BEFORE, AFTER)), ["WF107"])
    assert not ok and "the edit is wrong" in why
    assert verdict_of([]) is None


def test_gradients_saved_by_one_run_are_found_by_the_next(tmp_path) -> None:
    saved = Gradients(str(tmp_path), None)
    grad = np.arange(6.0)
    saved.save(0, "self.log_ke", grad)
    later = Gradients(None, str(tmp_path))
    assert later.earlier(0, "self.log_ke", grad) is None  # unchanged: nothing to measure
    assert np.array_equal(later.earlier(0, "self.log_ke", grad + 1.0), grad)
    assert later.earlier(1, "self.log_ke", grad + 1.0) is None and later.earlier(0, "x", grad + 1.0) is None
    assert later.earlier(0, "self.log_ke", np.arange(5.0)) is None  # another shape
