"""FD along the direction an edit moved a gradient: ``apply --check``'s proof where FD accepts both gradients.

An edit that keeps the forward but moves a gradient by 0.1% of its norm (an in-place kernel update made
out-of-place) leaves FD agreeing before and after: its per-element and random-direction samples cannot
resolve the change. Along ``d = g_after - g_before`` they differ by ``|d|`` at once, so FD of the loss in that
one direction tells which gradient is the loss's. The run before the edit saves its gradients
(:data:`ENV_SAVE`, one ``.npy`` per backward of the first iteration and leaf); the run after it reads them
(:data:`ENV_AGAINST`) and measures FD along each changed gradient's ``d``.

Part of the probe package: numpy only, relative imports.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import numpy as np

#: where the run saves its first iteration's gradients (one file per backward and leaf)
ENV_SAVE = "WARPFIX_VERIFY_SAVE_GRADIENTS"
#: where an earlier run saved the gradients this run's are compared with along their difference
ENV_AGAINST = "WARPFIX_VERIFY_DISCRIMINATE"
#: the step sizes FD is measured at along the change (finer than the verifier's ladder: the change is small)
STEPS = (1e-2, 3e-3, 1e-3, 3e-4, 1e-4)
#: FD at a step size sides with a gradient when it sits this many times closer to its directional derivative
CLOSER = 4.0
#: ... at this many step sizes, and at none with the other gradient
AGREEING = 2


class Gradients:
    """The gradients one run saves, and those an earlier run saved (both folders may be unset)."""

    def __init__(self, save: str | None, against: str | None) -> None:
        self.save_dir = save
        self.against_dir = against

    @classmethod
    def from_environment(cls) -> Gradients:
        return cls(os.environ.pop(ENV_SAVE, None) or None, os.environ.pop(ENV_AGAINST, None) or None)

    def save(self, backward: int, name: str, grad: np.ndarray) -> None:
        if self.save_dir:
            np.save(os.path.join(self.save_dir, _file(backward, name)), np.asarray(grad, dtype=np.float64))

    def earlier(self, backward: int, name: str, grad: np.ndarray) -> np.ndarray | None:
        """The earlier run's gradient of the same leaf at the same backward, when it has the same shape, is
        finite and differs from ``grad``; else None."""
        if not self.against_dir:
            return None
        path = os.path.join(self.against_dir, _file(backward, name))
        if not os.path.exists(path):
            return None
        old = np.load(path)
        now = np.asarray(grad, dtype=np.float64)
        if old.shape != now.shape or not (np.all(np.isfinite(old)) and np.all(np.isfinite(now))):
            return None
        return None if np.array_equal(old, now) else old


def _file(backward: int, name: str) -> str:
    return f"b{backward}_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:80]}.npy"


def direction(now: np.ndarray, before: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The perturbation along which the two gradients differ most for FD: ``d`` weighted by each element's
    scale (as the probe's other samples are), its largest element the largest scale."""
    w = (np.asarray(now, dtype=np.float64) - before).reshape(-1) * scale.reshape(-1)
    top = float(np.max(np.abs(w)))
    return w / top * float(np.max(scale)) if top > 0.0 else w


def decide(fds: list[float], now: float, before: float) -> dict[str, Any]:
    """Which directional derivative FD along the edit's direction confirms: ``after`` (the edit's gradient) when
    at :data:`AGREEING` step sizes or more FD sits :data:`CLOSER` times closer to it than to the original's, and
    at none the other way round; ``before`` in the mirror case; else ``unresolved``. Float noise scatters FD
    at small steps and truncation biases it at large ones, each differently at each step size: agreeing with
    one side at several of them, and never with the other, is not chance."""
    values = [f for f in fds if math.isfinite(f)]
    e_now = [abs(f - now) for f in values]
    e_before = [abs(f - before) for f in values]
    after = sum(b > CLOSER * a for a, b in zip(e_now, e_before, strict=True))
    earlier = sum(a > CLOSER * b for a, b in zip(e_now, e_before, strict=True))
    out: dict[str, Any] = {"after_ad": now, "before_ad": before, "fd": values,
                           "err_after": min(e_now, default=math.inf), "err_before": min(e_before, default=math.inf),
                           "sides_after": after, "sides_before": earlier}
    if after >= AGREEING and not earlier:
        return {**out, "verdict": "after"}
    if earlier >= AGREEING and not after:
        return {**out, "verdict": "before"}
    return {**out, "verdict": "unresolved"}


def along_the_change(tracer: Any, job: Any, info: Any, values: dict[int, np.ndarray], res: dict[str, Any]) -> None:
    """Save the gradient of ``info`` at the first iteration's backward ``job``; where an earlier run's differs,
    measure FD along the difference at each of :data:`STEPS` and put the decision in ``res``."""
    if job.entry.get("window", 0) != 0:
        return
    index = next((k for k, r in enumerate(job.records) if r is job.record), 0)
    grad = np.asarray(job.ad[id(info)], dtype=np.float64)
    tracer.gradients.save(index, info.name, grad)
    before = tracer.gradients.earlier(index, info.name, grad)
    if before is None:
        return
    x = values[info.order]
    dtype, ulp, scale = tracer.perturbation_units(info, x)
    v = direction(grad, before, scale).reshape(x.shape)
    measure, _ = tracer.rung_measure(info, job.objective, job.plan, x, v, None, ulp, dtype, STEPS)
    fds = [measure(k).fd for k in range(len(STEPS))]
    res["discriminate"] = decide(fds, float(np.dot(grad.reshape(-1), v.reshape(-1))),
                                 float(np.dot(before.reshape(-1), v.reshape(-1))))


def verdict_of(decisions: list[dict[str, Any]]) -> tuple[bool, str] | None:
    """``apply --check``'s reading of the decisions of the run after an edit: (False, why) when FD along any
    changed gradient sides with the original's, (True, why) when it sides with the edit's at least once and
    never with the original's, None when it resolves none."""
    against = [d for d in decisions if d.get("verdict") == "before"]
    if against:
        d = against[0]
        return False, (f"FD along the direction the edit moved the gradient agrees with the original gradient at "
                       f"{d['sides_before']} of {len(d['fd'])} step sizes (error {d['err_before']:.3g}, the edit's "
                       f"{d['err_after']:.3g}) and with the edit's at none: the edit is wrong")
    found = [d for d in decisions if d.get("verdict") == "after"]
    if not found:
        return None
    d = max(found, key=lambda d: d["err_before"] / max(d["err_after"], 1e-300))
    return True, (f"FD along the direction the edit moved the gradient agrees with the edit's gradient at "
                  f"{d['sides_after']} of {len(d['fd'])} step sizes (error {d['err_after']:.3g}, the original's "
                  f"{d['err_before']:.3g}) and with the original's at none: the edit is right")
