"""Judge finite differences before trusting them, and name the shape of a gradient mismatch.

Pure numpy: the probe feeds it the losses it measured, nothing here runs Warp.

Coordinates: a sample perturbs a parameter along a fixed vector ``v`` (one scaled
component, or a scaled random +-1 direction) by ``t * v`` for a ladder of step
sizes ``t``. The autodiff value of a sample is ``grad . v`` and the FD value is
``(L(x + t v) - L(x - t v)) / 2t``, so both are derivatives of the same scalar
function of ``t`` and compare directly.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

#: Relative tolerance for "two FD estimates agree" and for AD against FD.
REL_TOL = 0.02
#: FD is blind when AD predicts at least this many ulp of loss change and the loss does not move.
BLIND_ULPS = 8.0
#: A loss change of at most this many ulp is indistinguishable from rounding.
FLAT_ULPS = 2.0
#: An FD value counts only when it is this many times its rounding resolution.
RESOLVED = 4.0
#: Ratios within this relative spread are one constant factor.
FACTOR_SPREAD = 0.05
#: A smooth loss's one-sided slopes differ by O(t) * f'', so one rung down the ladder (t -> t/10) shrinks their
#: gap 10x, while a kink's gap stays: a gap that keeps more than the geometric mean of the two cases
#: ((t2/t1) ** 0.5 of it) is a kink.
KINK_SHRINK_EXPONENT = 0.5
#: A parameter passes on at least this many reliable agreeing samples (or all of them, when fewer were taken).
MIN_PASSING = 2

PASS = "pass"
FAIL = "fail"
UNRELIABLE = "unreliable"

# Reasons FD cannot judge (WF904).
CANCELLATION = "cancellation"
NOISE = "noise"
KINK_OR_CHAOS = "kink-or-chaos"
CHAOS = "chaos"
NON_FINITE = "non-finite-loss"
BELOW_RESOLUTION = "below-resolution"
KINK = "kink-at-evaluation-point"
INSUFFICIENT = "insufficient-samples"


@dataclass(frozen=True)
class StepResult:
    """The two losses measured at one step size ``t``.

    ``skew`` bounds how far either one-sided step is from ``t`` relatively (the perturbed parameter is rounded
    to its dtype): central FD is blind to it to first order, one-sided slopes are not.
    """

    t: float
    loss_plus: float
    loss_minus: float
    skew: float = 0.0

    @property
    def fd(self) -> float:
        return (self.loss_plus - self.loss_minus) / (2.0 * self.t)


@dataclass
class SampleJudgement:
    """The verdict on one perturbation direction."""

    kind: str  # "element" or "direction"
    ad: float
    fd: float | None
    status: str  # PASS, FAIL or UNRELIABLE
    reason: str = ""  # why unreliable (one of the reason constants)
    detail: str = ""
    index: int | None = None  # flat component index, for element samples

    @property
    def rel_err(self) -> float | None:
        if self.fd is None or not math.isfinite(self.ad):
            return None
        denom = max(abs(self.fd), abs(self.ad) * 1e-12, 1e-30)
        return abs(self.ad - self.fd) / denom


def fd_quantum(loss_ulp: float, t: float) -> float:
    """The smallest non-zero FD value a loss with this ulp can show at step ``t``."""
    return loss_ulp / (2.0 * t)


def judge_sample(
    kind: str,
    ad: float,
    steps: list[StepResult],
    loss_ulp: float,
    *,
    noise: float = 0.0,
    fd_floor: float = 0.0,
    index: int | None = None,
    base: float | None = None,
) -> SampleJudgement:
    """Judge one sample from its ladder of steps (largest step first).

    ``noise`` is the loss jitter seen between identical replays (0 when they reproduce
    exactly); ``fd_floor`` is an absolute slack (1e-3 of the typical |FD| of the parameter);
    ``base`` is the unperturbed loss: given, a mismatch at a kink of the loss there is unreliable, not a fail.
    """
    if not steps:
        raise ValueError("judge_sample needs at least one step")
    losses = [v for s in steps for v in (s.loss_plus, s.loss_minus)]
    if not all(math.isfinite(v) for v in losses):
        return SampleJudgement(kind, ad, None, UNRELIABLE, NON_FINITE, "the loss is not finite under perturbation", index)
    if not math.isfinite(ad):
        return SampleJudgement(kind, ad, None, FAIL, "", "autodiff gradient is NaN/inf while the loss is finite", index)

    resolution = [fd_quantum(loss_ulp, s.t) + noise / s.t for s in steps]
    fds = [s.fd for s in steps]
    # a step "sees nothing" when the loss moves by at most the rounding of one float32 sum
    flat = [abs(s.loss_plus - s.loss_minus) <= FLAT_ULPS * loss_ulp + 2.0 * noise for s in steps]
    blind = [f and 2.0 * s.t * abs(ad) >= BLIND_ULPS * loss_ulp + 2.0 * noise for f, s in zip(flat, steps, strict=True)]
    if all(flat):
        if ad == 0.0:
            return SampleJudgement(kind, ad, 0.0, PASS, index=index)
        if any(blind):
            return SampleJudgement(
                kind, ad, 0.0, UNRELIABLE, CANCELLATION,
                f"the loss moved by at most {FLAT_ULPS:g} ulp at every step although autodiff predicts a change of "
                f"{2.0 * steps[0].t * abs(ad) / loss_ulp:.3g} ulp at the largest step",
                index,
            )  # fmt: skip
        return SampleJudgement(
            kind, ad, 0.0, UNRELIABLE, BELOW_RESOLUTION,
            "the predicted loss change is below the float resolution of the loss", index,
        )  # fmt: skip

    best: tuple[float, int] | None = None
    for k in range(len(steps) - 1):
        if blind[k] or blind[k + 1]:
            continue
        a, b = fds[k], fds[k + 1]
        scale = max(abs(a), abs(b))
        gap = abs(a - b)
        tol = REL_TOL * scale + resolution[k] + resolution[k + 1]
        # a pair agreeing only inside the rounding resolution of the loss says nothing
        if gap <= tol and scale >= RESOLVED * resolution[k + 1]:
            rel = gap / scale
            if best is None or rel < best[0]:
                best = (rel, k)
    if best is None:
        if len(steps) < 2:
            raise ValueError("judge_sample needs at least two steps to judge agreement")
        if any(blind):
            return SampleJudgement(
                kind, ad, None, UNRELIABLE, CANCELLATION,
                "the loss stops changing at small steps although autodiff predicts a change (float cancellation)",
                index,
            )  # fmt: skip
        spread = ", ".join(f"{v:.4g}" for v in fds)
        return SampleJudgement(
            kind, ad, None, UNRELIABLE, KINK_OR_CHAOS, f"FD disagrees with itself across step sizes ({spread})", index
        )

    k = best[1]
    fd = 0.5 * (fds[k] + fds[k + 1])
    window = [fds[j] for j in range(k, len(steps)) if not blind[j]]
    slack = REL_TOL * abs(fd) + fd_floor + resolution[k + 1]
    # the steps below the agreeing pair depart from it only by roughness of the loss (the pair's truncation
    # error is already below its gap): that loss error, |FD_j - FD| t_j, blurs FD at the pair's step too
    rough = max((abs(fds[j] - fd) * steps[j].t for j in range(k + 2, len(steps)) if not blind[j]), default=0.0)
    in_window = min(window) - slack <= ad <= max(window) + slack
    if in_window and abs(ad - fd) <= slack + rough / steps[k + 1].t:  # never wider than the window itself
        return SampleJudgement(kind, ad, fd, PASS, index=index)
    if in_window:
        # autodiff matches only FD values of the steps where the loss is rough: no evidence either way
        spread = ", ".join(f"{v:.4g}" for v in fds)
        return SampleJudgement(
            kind, ad, fd, UNRELIABLE, NOISE,
            f"FD agrees with itself at steps {steps[k].t:.3g} and {steps[k + 1].t:.3g} ({fd:.4g}, autodiff {ad:.4g}) "
            f"and departs from it at smaller steps, where the loss is rough ({spread})", index,
        )  # fmt: skip
    usable = [(s, r) for s, r, b in zip(steps, resolution, blind, strict=True) if not b]
    kink = _kink_at_base(usable[-2:], base, fd, loss_ulp, noise) if base is not None and len(usable) >= 2 else ""
    if kink:
        return SampleJudgement(kind, ad, fd, UNRELIABLE, KINK, kink, index)
    return SampleJudgement(kind, ad, fd, FAIL, index=index)


def _kink_at_base(pair: list[tuple[StepResult, float]], base: float, fd: float, loss_ulp: float, noise: float) -> str:
    """Why the loss has a kink at the unperturbed point (loss ``base``), judged from the one-sided slopes at the
    two smallest steps (``(step, its FD resolution)``, larger first); "" when it looks smooth there.

    A kink: at the smaller step the right slope ``(L(x+t)-L(x))/t`` and the left ``(L(x)-L(x-t))/t`` still differ
    by more than the tolerance AD is held to (REL_TOL of |FD|: the central FD, their mean, is then no better a
    reference than either side) plus what the steps' skew can make of a straight line, by RESOLVED times the
    rounding of the three losses, and by more than a smooth loss keeps of the larger step's gap
    (KINK_SHRINK_EXPONENT).
    """
    (big, _), (small, res) = pair
    if not math.isfinite(base) or small.t >= big.t:
        return ""

    def gap(s: StepResult) -> float:
        return abs((s.loss_plus - base) - (base - s.loss_minus)) / s.t

    def slopes(s: StepResult) -> str:
        return f"{(s.loss_plus - base) / s.t:.4g} right, {(base - s.loss_minus) / s.t:.4g} left at step {s.t:.3g}"

    rounding = 2.0 * (loss_ulp + 2.0 * noise) / small.t  # a second difference of three rounded losses
    # one-sided steps t(1 +- skew) part a straight line's slopes by up to 2 skew |f'|
    skewed = small.skew * (abs(small.loss_plus - base) + abs(base - small.loss_minus)) / small.t
    kept = (small.t / big.t) ** KINK_SHRINK_EXPONENT * gap(big)
    if gap(small) <= max(REL_TOL * abs(fd) + res + skewed, RESOLVED * rounding, kept):
        return ""
    return (f"the one-sided slopes of the loss differ and do not converge as the step shrinks ({slopes(big)}; "
            f"{slopes(small)}), so central FD {fd:.4g} is no derivative to compare autodiff with")  # fmt: skip


def early_pass(ad: float, steps: list[StepResult], loss_ulp: float, noise: float = 0.0, *, strict: bool = False) -> bool:
    """True when the first two steps already agree with each other and with AD (stricter than judge_sample).

    ``strict`` (a pair further down the ladder, where the loss's rounding weighs more): the FD resolution at the
    smaller step must also be within REL_TOL of the FD values, so that agreement is not agreement within rounding.
    """
    if len(steps) < 2:
        return False
    a, b = steps[0].fd, steps[1].fd
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(ad)):
        return False
    if steps[0].loss_plus == steps[0].loss_minus or steps[1].loss_plus == steps[1].loss_minus:
        return False
    scale = max(abs(a), abs(b))
    res = fd_quantum(loss_ulp, steps[1].t) + noise / steps[1].t
    if abs(a - b) > REL_TOL * scale + res:
        return False
    fd = 0.5 * (a + b)
    if strict and res > REL_TOL * scale:
        return False
    return abs(ad - fd) <= REL_TOL * abs(fd) + res and scale > 4.0 * res


@dataclass
class ParamVerdict:
    """The verdict on one parameter of one backward."""

    verdict: str
    signature: str
    max_rel_err: float | None
    ad_fd_ratio: float | None
    reason: str = ""
    samples: list[SampleJudgement] = field(default_factory=list)


def _nice_factor(r: float) -> str:
    for n in range(2, 65):
        if abs(r - n) <= 0.02 * n:
            return f"{n}x"
        if abs(r - 1.0 / n) <= 0.02 / n:
            return f"1/{n}x"
    if abs(r + 1.0) <= 0.02:
        return "-1x (sign flip)"
    return f"{r:.4g}x"


def _pass_or_insufficient(samples: list[SampleJudgement], max_rel: float | None, ratio: float | None,
                          planned: int | None) -> ParamVerdict:
    """PASS when enough of the samples, none failing, could be judged; UNRELIABLE (insufficient-samples) otherwise.

    A pass needs MIN_PASSING reliable passing samples (all of them when fewer were taken: a scalar has one) and no
    more unreliable samples than reliable ones: one agreeing perturbation among five FD could not judge says
    little about the rest of the parameter; nor does a pass on fewer perturbations than the ``planned`` ones
    (the FD budget ran out).
    """
    passing = [s for s in samples if s.status == PASS]
    unreliable = [s for s in samples if s.status == UNRELIABLE]
    if not (len(passing) >= min(MIN_PASSING, len(samples)) and len(passing) >= len(unreliable)):
        reasons = ", ".join(f"{r} x{n}" for r, n in sorted(Counter(s.reason for s in unreliable).items()))
        why = (f"{INSUFFICIENT}: FD agrees with autodiff on {len(passing)} of {len(samples)} perturbation(s) and "
               f"cannot judge the other {len(unreliable)} ({reasons}); a pass needs at least "
               f"{min(MIN_PASSING, len(samples))} agreeing and no more unjudged than agreeing")  # fmt: skip
        return ParamVerdict(UNRELIABLE, "", max_rel, ratio, why, samples)
    if planned is not None and len(samples) < planned:
        why = (f"{INSUFFICIENT}: FD agrees with autodiff on the {len(samples)} perturbation(s) it measured, fewer "
               f"than the {planned} a pass needs")  # fmt: skip
        return ParamVerdict(UNRELIABLE, "", max_rel, ratio, why, samples)
    return ParamVerdict(PASS, "", max_rel, ratio, samples=samples)


def classify(samples: list[SampleJudgement], *, chaos_hint: bool = False, planned: int | None = None) -> ParamVerdict:
    """Aggregate the sample judgements of one parameter into a verdict and a WF901 signature.

    Signatures: ``all-zero``, ``NaN/inf``, ``constant factor <f>``, ``sparse``, ``dense``.
    (``cross-window`` is decided by the caller, which knows the window structure.) ``planned``: how many
    perturbations the caller meant to measure, when its budget may have cut them short.
    """
    reliable = [s for s in samples if s.status != UNRELIABLE]
    rel_errs = [e for s in reliable if (e := s.rel_err) is not None]
    max_rel = max(rel_errs) if rel_errs else None
    ratios = [s.ad / s.fd for s in reliable if s.fd not in (None, 0.0) and math.isfinite(s.ad)]
    ratio = float(np.median(ratios)) if ratios else None

    if any(not math.isfinite(s.ad) for s in samples):
        return ParamVerdict(FAIL, "NaN/inf", max_rel, ratio, samples=samples)
    failing = [s for s in reliable if s.status == FAIL]
    non_finite = [s for s in samples if s.reason == NON_FINITE]
    if failing and non_finite:
        # the replayed forward blows up under some perturbations: its other differences are no evidence
        why = (f"{NON_FINITE}: the loss is not finite under {len(non_finite)} of {len(samples)} perturbation(s), so "
               f"the {len(failing)} that disagree with autodiff do not show a wrong gradient")  # fmt: skip
        return ParamVerdict(UNRELIABLE, "", max_rel, ratio, why, samples)
    kinks = [s for s in samples if s.reason == KINK_OR_CHAOS]
    if failing and len(kinks) > len(failing):
        # most perturbations show a loss that is not smooth here (warp.fem's darcy_ls: level-set lookups at
        # mesh nodes): the few step pairs that happen to agree are no evidence of a wrong gradient
        why = (f"{KINK_OR_CHAOS}: FD disagrees with itself across step sizes under {len(kinks)} of {len(samples)} "
               f"perturbation(s), so the {len(failing)} that disagree with autodiff do not show a wrong gradient")  # fmt: skip
        return ParamVerdict(UNRELIABLE, "", max_rel, ratio, why, samples)
    if not reliable:
        reasons = sorted({s.reason for s in samples})
        if chaos_hint and KINK_OR_CHAOS in reasons:
            reasons = [CHAOS if r == KINK_OR_CHAOS else r for r in reasons]
        detail = next((s.detail for s in samples if s.detail), "")
        return ParamVerdict(UNRELIABLE, "", None, None, ", ".join(reasons) + (f": {detail}" if detail else ""), samples)
    if not failing:
        return _pass_or_insufficient(samples, max_rel, ratio, planned)

    if all(s.ad == 0.0 for s in failing) and all(s.ad == 0.0 for s in reliable):
        return ParamVerdict(FAIL, "all-zero", max_rel, 0.0, samples=samples)
    fail_ratios = [s.ad / s.fd for s in failing if s.fd not in (None, 0.0)]
    passing = [s for s in reliable if s.status == PASS and s.fd not in (None, 0.0)]
    if len(fail_ratios) >= 2 and not passing:  # one sample cannot show that a factor is constant
        med = float(np.median(fail_ratios))
        if med != 0.0 and all(abs(r - med) <= FACTOR_SPREAD * abs(med) for r in fail_ratios):
            return ParamVerdict(FAIL, f"constant factor {_nice_factor(med)}", max_rel, med, samples=samples)
    elements = [s for s in reliable if s.kind == "element"]
    if any(s.status == PASS for s in elements):  # some elements right, others (or a direction) wrong
        return ParamVerdict(FAIL, "sparse", max_rel, ratio, samples=samples)
    return ParamVerdict(FAIL, "dense", max_rel, ratio, samples=samples)
