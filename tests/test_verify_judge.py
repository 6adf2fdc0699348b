"""Unit tests of the FD judge and the WF901 signature classifier (pure numpy, no Warp)."""

from __future__ import annotations

import numpy as np
import pytest

from warpfix.verify import judge
from warpfix.verify.judge import StepResult, classify, judge_sample

ULP32 = float(np.spacing(np.float32(1.0)))
LADDER = (1e-1, 1e-2, 1e-3, 1e-4)


def ladder(f, x0: float = 0.0, steps=LADDER, dtype=np.float32) -> list[StepResult]:
    """Central-difference steps of a scalar function evaluated (and rounded) in ``dtype``."""
    return [StepResult(t, float(dtype(f(x0 + t))), float(dtype(f(x0 - t)))) for t in steps]


def smooth(x: float) -> float:
    return 1.0 + 3.0 * x + 0.5 * x * x


def test_correct_gradient_passes():
    s = judge_sample("element", 3.0, ladder(smooth), ULP32)
    assert s.status == judge.PASS
    assert s.fd == pytest.approx(3.0, rel=1e-3)


@pytest.mark.parametrize("factor", [2.0, 0.5, -1.0, 1.1])
def test_wrong_gradient_fails(factor):
    s = judge_sample("element", 3.0 * factor, ladder(smooth), ULP32)
    assert s.status == judge.FAIL
    assert s.ad / s.fd == pytest.approx(factor, rel=1e-2)


def test_nan_gradient_with_finite_loss_fails():
    s = judge_sample("element", float("nan"), ladder(smooth), ULP32)
    assert s.status == judge.FAIL


def test_non_finite_loss_is_unreliable():
    steps = [StepResult(0.1, float("inf"), 1.0), StepResult(0.01, 1.0, 1.0)]
    s = judge_sample("element", 1.0, steps, ULP32)
    assert (s.status, s.reason) == (judge.UNRELIABLE, judge.NON_FINITE)


def test_cancellation_is_unreliable_not_fail():
    # the loss is 4e6 in float32 (ulp 0.5); a correct derivative of 20 moves it by < 2 ulp at t=0.05 ...
    big = 4.0e6
    ulp = float(np.spacing(np.float32(big)))
    steps = [StepResult(t, big, big) for t in LADDER]
    s = judge_sample("element", 200.0, steps, ulp)
    assert (s.status, s.reason) == (judge.UNRELIABLE, judge.CANCELLATION)
    # ... and a loss that moves by one ulp only (rounding of a float32 sum) is no better
    steps = [StepResult(t, big + ulp, big) for t in LADDER]
    assert judge_sample("element", 200.0, steps, ulp).reason == judge.CANCELLATION


def test_zero_gradient_of_flat_loss_passes():
    steps = [StepResult(t, 2.0, 2.0) for t in LADDER]
    assert judge_sample("element", 0.0, steps, ULP32).status == judge.PASS


def test_tiny_gradient_below_resolution_is_unreliable():
    steps = [StepResult(t, 2.0, 2.0) for t in LADDER]
    s = judge_sample("element", 1e-7, steps, ULP32)
    assert (s.status, s.reason) == (judge.UNRELIABLE, judge.BELOW_RESOLUTION)


def test_fd_inconsistent_across_steps_is_unreliable():
    rng = np.random.default_rng(0)
    steps = [StepResult(t, float(rng.normal()), float(rng.normal())) for t in LADDER]
    s = judge_sample("element", 1.0, steps, ULP32)
    assert (s.status, s.reason) == (judge.UNRELIABLE, judge.KINK_OR_CHAOS)


def test_kink_at_large_steps_uses_the_small_steps():
    # |x| kink at 0.05 from the expansion point: the large step crosses it, small steps do not
    def f(x: float) -> float:
        return 2.0 * x + 10.0 * abs(x - 0.05)

    s = judge_sample("element", 2.0 - 10.0, ladder(f, steps=(1e-1, 1e-2, 1e-3), dtype=np.float64), 1e-16)
    assert s.status == judge.PASS
    assert s.fd == pytest.approx(-8.0)


def test_noise_between_replays_widens_resolution():
    steps = [StepResult(t, 1.0 + 3.0 * t + 1e-6, 1.0 - 3.0 * t) for t in (1e-2, 1e-3)]
    assert judge_sample("element", 3.0, steps, ULP32, noise=1e-6).status == judge.PASS


def test_early_pass_only_when_both_steps_agree_with_ad():
    steps = ladder(smooth)[:2]
    assert judge.early_pass(3.0, steps, ULP32)
    assert not judge.early_pass(6.0, steps, ULP32)
    flat = [StepResult(t, 1.0, 1.0) for t in LADDER[:2]]
    assert not judge.early_pass(0.0, flat, ULP32)


def sample(ad: float, fd: float, kind: str = "element", status: str | None = None) -> judge.SampleJudgement:
    if status is None:
        status = judge.PASS if abs(ad - fd) <= 0.02 * abs(fd) else judge.FAIL
    return judge.SampleJudgement(kind, ad, fd, status)


def test_classify_pass():
    v = classify([sample(1.0, 1.0), sample(2.0, 2.01), sample(-3.0, -3.0, "direction")])
    assert v.verdict == judge.PASS and v.signature == ""
    assert v.ad_fd_ratio == pytest.approx(1.0, abs=0.01)


def test_classify_all_zero():
    v = classify([sample(0.0, 1.0), sample(0.0, 2.0), sample(0.0, -1.0, "direction")])
    assert (v.verdict, v.signature, v.ad_fd_ratio) == (judge.FAIL, "all-zero", 0.0)


def test_classify_constant_factor_names_the_factor():
    v = classify([sample(2.0, 1.0), sample(4.02, 2.0), sample(-6.0, -3.0, "direction")])
    assert v.signature == "constant factor 2x"
    v = classify([sample(0.26, 1.0), sample(0.52, 2.0)])
    assert v.signature.startswith("constant factor 0.26")


def test_classify_one_sample_is_not_a_constant_factor():
    assert classify([sample(2.0, 1.0)]).signature == "dense"


def test_classify_sparse_when_some_elements_agree():
    v = classify([sample(1.0, 1.0), sample(5.0, 2.0), sample(3.0, 3.0)])
    assert v.signature == "sparse"
    # every element right but a random direction wrong: a bug confined to elements not sampled
    v = classify([sample(1.0, 1.0), sample(2.0, 2.0), sample(9.0, 3.0, "direction")])
    assert v.signature == "sparse"


def test_classify_dense():
    v = classify([sample(1.5, 1.0), sample(1.0, 2.0), sample(9.0, 3.0, "direction")])
    assert (v.verdict, v.signature) == (judge.FAIL, "dense")


def test_classify_nan():
    v = classify([sample(float("nan"), 1.0, status=judge.FAIL), sample(1.0, 1.0)])
    assert v.signature == "NaN/inf"


def test_classify_unreliable_keeps_the_reason():
    s = judge.SampleJudgement("element", 1.0, None, judge.UNRELIABLE, judge.KINK_OR_CHAOS, "FD disagrees")
    v = classify([s, s], chaos_hint=True)
    assert v.verdict == judge.UNRELIABLE
    assert v.reason.startswith(judge.CHAOS)
    assert classify([s]).reason.startswith(judge.KINK_OR_CHAOS)


def test_classify_unreliable_samples_do_not_hide_a_failure():
    bad = judge.SampleJudgement("element", 1.0, None, judge.UNRELIABLE, judge.CANCELLATION)
    v = classify([bad, sample(0.0, 2.0)])
    assert v.verdict == judge.FAIL


def test_classify_a_loss_that_is_not_smooth_at_most_samples_decides_nothing():
    # warp.fem's darcy_ls: four of six perturbations give FD that changes with the step, one agreeing pair
    # disagrees with autodiff
    kink = judge_sample("element", -0.015, [StepResult(t, 0.0, -2.0 * t * f) for t, f in
                                            ((1e-1, 0.0064), (1e-2, 0.0112), (1e-3, 0.0103), (1e-4, 0.045))], ULP32)
    assert kink.reason == judge.KINK_OR_CHAOS
    v = classify([kink, kink, kink, kink, sample(-0.0996, -0.2011)])
    assert v.verdict == judge.UNRELIABLE
    assert v.reason.startswith(judge.KINK_OR_CHAOS) and "4 of 5" in v.reason
    # fewer kinks than disagreeing samples: the disagreement stands
    assert classify([kink, sample(-0.0996, -0.2011), sample(0.5, 1.5)]).verdict == judge.FAIL


def test_classify_a_loss_that_blows_up_under_perturbation_decides_nothing():
    # warp.fem's elastic_shape: most perturbed replays give a NaN loss, one finite one disagrees
    blown = judge_sample("element", 0.06, [StepResult(0.1, float("nan"), float("nan"))], ULP32)
    assert blown.reason == judge.NON_FINITE
    v = classify([blown, sample(-0.0005, -0.0042)])
    assert v.verdict == judge.UNRELIABLE
    assert v.reason.startswith(judge.NON_FINITE) and "1 of 2" in v.reason
    # without a failing sample the finite ones still pass, when there are enough of them
    assert classify([blown, sample(-0.0042, -0.0042), sample(0.003, 0.003)]).verdict == judge.PASS
    assert classify([blown, sample(-0.0042, -0.0042)]).reason.startswith(judge.INSUFFICIENT)


def unjudged(reason: str) -> judge.SampleJudgement:
    return judge.SampleJudgement("element", 1.0, None, judge.UNRELIABLE, reason, "FD cannot judge")


def test_classify_one_agreeing_sample_among_unjudged_ones_is_no_pass():
    v = classify([sample(1.0, 1.0)] + [unjudged(judge.KINK_OR_CHAOS)] * 4 + [unjudged(judge.NOISE)])
    assert (v.verdict, v.signature) == (judge.UNRELIABLE, "")
    assert v.reason.startswith(judge.INSUFFICIENT)
    assert "1 of 6" in v.reason and f"{judge.KINK_OR_CHAOS} x4" in v.reason and f"{judge.NOISE} x1" in v.reason
    # one agreeing and one unjudged of two: half the parameter untested
    assert classify([sample(1.0, 1.0), unjudged(judge.BELOW_RESOLUTION)]).verdict == judge.UNRELIABLE


def test_classify_a_pass_needs_agreeing_samples_not_outnumbered_by_unjudged_ones():
    agree = [sample(1.0, 1.0), sample(2.0, 2.0), sample(-3.0, -3.0, "direction")]
    assert classify(agree[:2] + [unjudged(judge.KINK_OR_CHAOS)] * 3).verdict == judge.UNRELIABLE
    assert classify(agree + [unjudged(judge.KINK_OR_CHAOS)] * 3).verdict == judge.PASS  # warp.fem's elastic_shape


def test_classify_a_scalar_parameter_passes_on_its_one_sample():
    # one element is the whole parameter: its one agreeing sample is all the evidence there is
    assert classify([sample(1.0, 1.0)]).verdict == judge.PASS
    assert classify([sample(1.0, 1.0), sample(2.0, 2.0)]).verdict == judge.PASS


def test_mismatch_at_a_kink_at_the_evaluation_point_is_unreliable():
    # darcy_ls's shape: the loss has a kink where it is evaluated, autodiff gives one side's slope (2.5), central
    # FD the mean of both sides (2.0) at every step, so FD agrees with itself and AD is 1.25x off it
    def f(x: float) -> float:
        return 1.0 + 2.0 * x + 0.5 * abs(x)

    steps = ladder(f)
    assert judge_sample("element", 2.5, steps, ULP32).status == judge.FAIL  # without the unperturbed loss
    s = judge_sample("element", 2.5, steps, ULP32, base=float(np.float32(f(0.0))))
    assert (s.status, s.reason) == (judge.UNRELIABLE, judge.KINK)
    assert "2.5 right, 1.5 left" in s.detail
    # a kink whose slopes differ by less than the tolerance AD is held to excuses nothing
    def g(x: float) -> float:
        return 1.0 + 2.0 * x + 0.02 * abs(x)

    assert judge_sample("element", 2.5, ladder(g), ULP32, base=float(np.float32(g(0.0)))).status == judge.FAIL


@pytest.mark.parametrize("curvature", [0.5, 1000.0])
def test_smooth_loss_with_a_wrong_gradient_still_fails_given_the_base(curvature):
    # one-sided slopes differ by 2 * curvature * t: with curvature 1000 by 0.2 (6.7% of FD) at t=1e-4, but they
    # shrink with the step, so this is curvature, not a kink
    def f(x: float) -> float:
        return 1.0 + 3.0 * x + curvature * x * x

    s = judge_sample("element", 3.0 * 1.2, ladder(f), ULP32, base=float(np.float32(f(0.0))))
    assert s.status == judge.FAIL
    assert s.ad / s.fd == pytest.approx(1.2, rel=1e-2)


def test_smooth_loss_with_the_right_gradient_passes_given_the_base():
    s = judge_sample("element", 3.0, ladder(smooth), ULP32, base=float(np.float32(smooth(0.0))))
    assert s.status == judge.PASS


def test_one_sided_steps_skewed_by_rounding_are_no_kink():
    # a straight line probed at steps the parameter's dtype rounds unevenly: t (1 + e) to the right and t (1 - e)
    # to the left, e = 1/64 at the smallest rung (32 ulp) and 10x less one rung up; the one-sided slopes differ
    # by 2 e * 3 (3.1% of FD) at the smallest rung only, which the skew of the steps accounts for
    steps = []
    for t in LADDER:
        e = (1.0 / 64.0) * LADDER[-1] / t
        steps.append(StepResult(t, 1.0 + 3.0 * t * (1.0 + e), 1.0 - 3.0 * t * (1.0 - e), skew=e))
    s = judge_sample("element", 3.0 * 1.2, steps, 1e-16, base=1.0)
    assert s.status == judge.FAIL


# warp's navier_stokes example, a random direction of its perturbation: (t, L(x + t v), L(x - t v)) as the probe
# measured them (loss -1.2376376; float32, so the rough steps are a few hundred ulp off, not rounding alone)
NAVIER_BASE = -1.2376376390457153
NAVIER_LADDER = [StepResult(0.1, NAVIER_BASE - 0.00754, NAVIER_BASE - 0.007958),
                 StepResult(0.01, NAVIER_BASE - 6.473e-05, NAVIER_BASE - 0.0001072),
                 StepResult(0.001, NAVIER_BASE - 5.96e-06, NAVIER_BASE - 1.788e-06),
                 StepResult(0.0001, NAVIER_BASE - 2.384e-07, NAVIER_BASE - 4.768e-07)]
NAVIER_ULP = float(np.spacing(np.float32(NAVIER_BASE)))


def test_a_gradient_inside_only_the_rough_small_steps_fd_is_not_a_pass():
    """FD agrees with itself at t = 0.1 and 0.01 (~0.0021) and scatters below (-0.0021, 0.0012): the benchmark's
    navier_stokes drop-requires-grad mutant has an all-zero gradient there, which passed because the band
    spanned every smaller step's FD; the unmutated program's 0.0020293 is within the roughness the small
    steps show and still passes."""
    wrong = judge_sample("direction", 0.0, NAVIER_LADDER, NAVIER_ULP, base=NAVIER_BASE)
    assert (wrong.status, wrong.reason) == (judge.UNRELIABLE, judge.NOISE)
    right = judge_sample("direction", 0.0020293, NAVIER_LADDER, NAVIER_ULP, base=NAVIER_BASE)
    assert right.status == judge.PASS
    # outside every step's FD it is a mismatch as before (without the base: at the base the rough steps look a kink)
    assert judge_sample("direction", -0.005, NAVIER_LADDER, NAVIER_ULP).status == judge.FAIL


def test_the_roughness_of_the_small_steps_never_widens_the_band_beyond_their_fd():
    """FD 1.0 at the agreeing pair, 1.5 at a smaller step: autodiff 0.95 is outside every FD value (beyond the
    slack), a mismatch, though the roughness the small step shows would reach it."""
    steps = [StepResult(0.1, 1.1, 0.9), StepResult(0.01, 1.01, 0.99), StepResult(0.001, 1.0015, 0.9985)]
    assert judge_sample("direction", 0.95, steps, ULP32).status == judge.FAIL
    assert judge_sample("direction", 1.0, steps, ULP32).status == judge.PASS
