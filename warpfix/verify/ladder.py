"""One FD sample's ladder of step sizes (part of the verify probe: relative imports, numpy only).

A sample perturbs a leaf along ``v`` by ``+-t v`` for ``t`` down STEP_LADDER, two replays a rung. It stops at
the first pair of consecutive rungs that agree with each other and with autodiff (:func:`judge.early_pass`).
It first walks down from the rung at which the leaf's previous sample agreed: which steps are exact depends
on the curvature of the loss along the leaf, which changes little between samples and iterations, so a
sample whose large steps are too coarse costs two or three rungs instead of four. When no pair from there
down agrees, the sample runs the whole ladder from the largest step, as if it had not tried (the losses
measured are reused), and the judge sees the same ladder it would have seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from . import judge

#: Step-size ladder (dimensionless, times the per-element scale of the parameter).
STEP_LADDER = (1e-1, 1e-2, 1e-3, 1e-4)


def _finite(step: judge.StepResult) -> bool:
    return math.isfinite(step.loss_plus) and math.isfinite(step.loss_minus)


def run_ladder(
    measure: Callable[[int], judge.StepResult],
    ad: float,
    loss_ulp: float,
    noise: float,
    start: int,
    steps: list[judge.StepResult],
    on_non_finite: Callable[[int], None],
) -> int | None:
    """Append to ``steps`` (largest step first) the rungs one sample needs, measured by ``measure(k)`` (the
    losses at rung ``k`` of STEP_LADDER); return the rung where the pair that agreed early begins, or None
    when the judge needs the whole ladder. ``start``: the rung to try first (0: the largest step).
    ``on_non_finite(k)`` is told of a rung whose loss is not finite."""
    measured: dict[int, judge.StepResult] = {}

    def rung(k: int) -> judge.StepResult:
        if k not in measured:
            measured[k] = measure(k)
        return measured[k]

    # from the rung where the leaf's FD last agreed down to the smallest step, while every loss is finite
    for k in range(start + 1, len(STEP_LADDER) if start > 0 else 0):
        pair = [rung(k - 1), rung(k)]
        if not all(_finite(s) for s in pair):
            break
        if judge.early_pass(ad, pair, loss_ulp, noise, strict=True):
            steps += [rung(j) for j in range(start, k + 1)]
            return k - 1
    too_large: judge.StepResult | None = None  # a largest rung whose loss is not finite
    finite_at: list[int] = []
    for k in range(len(STEP_LADDER)):
        step = rung(k)
        if not _finite(step):
            on_non_finite(k)
            if steps:  # finite at a larger step and not at this one: the sample is unreliable
                steps.append(step)
                return None
            # a step too large for the forward (a mesh element inverted): the smaller rungs judge
            too_large = step
            continue
        steps.append(step)
        finite_at.append(k)
        # the first two finite rungs as ever; a pair further down only when rounding cannot make it agree
        if len(steps) >= 2 and judge.early_pass(ad, steps[-2:], loss_ulp, noise, strict=len(steps) > 2):
            return finite_at[-2]
    if len(steps) < 2 and too_large is not None:
        steps.append(too_large)  # too few rungs with a finite loss to judge anything
    return None
