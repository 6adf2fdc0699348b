"""A few numbers that stand for a gradient: enough to tell whether an edit changed it, small enough for JSON.

The probe sketches the autodiff gradient of every leaf it compares with FD at every backward; ``apply
--check`` compares the sketches of the runs before and after an edit (numpy only: the probe imports it).

A sketch holds the element count, an exact checksum, the L2 norm and the projections onto a few fixed
pseudo-random Gaussian vectors (the same vectors for the same element count in every run). Two gradients
with the same checksum are identical; otherwise each projection differs by about ``|g_a - g_b|`` (the
Gaussian vectors have unit variance), so the largest difference, relative to the norm, measures the change.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

PROJECTIONS = 3
SEED = 20260  # fixed: both runs must project onto the same vectors


def sketch(values: np.ndarray) -> dict[str, Any]:
    """The sketch of a gradient (any shape; compared as its flat float64 values)."""
    g = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    out: dict[str, Any] = {"n": int(g.size), "crc": zlib.crc32(g.view(np.uint8))}
    if not np.all(np.isfinite(g)):
        return {**out, "norm": None, "proj": None}  # only the checksum says anything
    rng = np.random.default_rng(SEED)
    proj = [float(np.dot(rng.standard_normal(g.size), g)) for _ in range(PROJECTIONS)]
    return {**out, "norm": float(np.linalg.norm(g)), "proj": proj}


def change(a: dict[str, Any], b: dict[str, Any]) -> float:
    """How much gradient ``b`` differs from ``a``, relative to the larger norm: 0.0 when identical, ``inf``
    when they cannot be compared (other element counts, non-finite values)."""
    if a["n"] != b["n"]:
        return math.inf
    if a["crc"] == b["crc"]:
        return 0.0
    if a.get("norm") is None or b.get("norm") is None:
        return math.inf
    scale = max(a["norm"], b["norm"])
    if scale == 0.0:
        return 0.0
    diffs = [abs(a["norm"] - b["norm"]), *(abs(x - y) for x, y in zip(a["proj"], b["proj"], strict=True))]
    return max(diffs) / scale
