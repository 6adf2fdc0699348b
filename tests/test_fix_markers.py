"""``check``'s ``[*]`` and ``apply`` agree: a finding marked with a safe fix is one the codemod rewrites.

``warpfix check`` decides the marker without libcst (``FixSafety`` of the finding); ``warpfix apply``
runs the codemod (:func:`warpfix.fixes.compute_edits`). Over every golden variant, each finding
``check`` marks ``[*]`` must get an edit, alone (so an earlier fix moving its line is no excuse);
and where the detector can tell that the codemod refuses (WF403, shaped like Warp's own tests),
the finding has no ``[*]`` and its fix note says why.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from tests.test_golden import CASES, GOLDEN
from warpfix.engine import check_paths, check_sources, parse_version
from warpfix.finding import Fix, FixSafety
from warpfix.fixes import compute_edits
from warpfix.report.base import count_fixable

VARIANTS = [pytest.param(d / v, c, id=f"{d.name}/{v}") for d, c, v in (p.values for p in CASES)]


@pytest.mark.parametrize(("folder", "case"), VARIANTS)
def test_every_safe_fix_check_marks_gets_an_edit(folder: Path, case: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    assert folder.is_relative_to(GOLDEN)
    monkeypatch.chdir(folder)
    version = parse_version(case["warp_version"]) if "warp_version" in case else None
    result = check_paths(["."], use_cache=False, warp_version=version)
    refused = []
    for finding in result.findings:
        if finding.fix.safety is FixSafety.SAFE:
            fixed = compute_edits(result.sources, [finding])
            refused += [f"{os.path.normpath(f.path)}:{f.line}:{f.rule}: {why}" for f, why in fixed.skipped]
    assert not refused, refused


# In the shape of warp/tests/test_noise.py (curlnoise_2d_reimpl_loss) and tile/test_tile_composite_row.py:
# a product carried by a dynamic loop whose bound a launch passes as a local variable, and one whose
# bound is a module constant larger than max_unroll, read after the loop.
NOISE = '''import warp as wp

DELAY_ITERS = 2000


@wp.kernel
def octave_loss(xy: wp.array(dtype=float), octaves: int, gain: float, loss: wp.array(dtype=float)):
    tid = wp.tid()
    curl = float(0.0)
    amp = float(1.0)
    for _ in range(octaves):
        curl = curl + amp * xy[tid]
        amp = amp * gain
    wp.atomic_add(loss, 0, curl)


@wp.kernel
def delayed(src: wp.array(dtype=float), delay: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    scale = float(1.0)
    for _ in range(DELAY_ITERS):
        scale = scale * (float(1.0) + delay[0])
    out[i] = src[i] * scale


def test_octaves():
    octaves = 3
    xy = wp.ones(3, dtype=float, requires_grad=True)
    src = wp.ones(3, dtype=float, requires_grad=True)
    delay = wp.zeros(1, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    out = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(octave_loss, 3, inputs=[xy, octaves, 0.5, loss])
        wp.launch(delayed, 3, inputs=[src, delay, out])
    tape.backward(loss=loss)
'''


def test_refused_wf403_fixes_are_not_marked_and_say_why() -> None:
    sources = {"test_noise.py": NOISE}
    findings = check_sources(sources, select=["WF403"]).findings
    assert [f.line for f in findings] == [12, 22, 23]
    assert count_fixable(findings) == (0, 0)
    notes = [f.fix.description.partition("; not automatic: ")[2] for f in findings]
    launch = "the launch at line 35 binds the bound `octaves` to `octaves`, not an integer literal"
    bound = "the loop bound `range(DELAY_ITERS)` is not `range(<parameter>)`"
    assert notes[0].startswith(launch)
    assert notes[1] == bound
    assert notes[2].startswith(f"{bound}; nor can the loop become a @wp.func: `scale` is carried across iterations")
    assert [f.data["no_edit"] for f in findings] == notes  # what `apply` says it did not fix, and why
    # the codemod agrees: offered the fix anyway (without the detector's reason), it makes no edit either
    forced = [dataclasses.replace(f, fix=Fix(FixSafety.SAFE, ""), data={**f.data, "no_edit": None}) for f in findings]
    assert compute_edits(sources, forced).new_sources == {}


def test_a_stale_read_only_a_gradient_free_array_needs_is_no_finding() -> None:
    """``scale * (1 + delay[0])`` in the loop reads the stale ``scale`` only for the adjoint of ``delay``: when every
    recorded launch passes ``delay`` without a gradient that adjoint goes nowhere (the use of ``scale`` after the
    loop, whose adjoint ``src`` needs, stays reported)."""
    sources = {"test_noise.py": NOISE.replace("delay = wp.zeros(1, dtype=float, requires_grad=True)",
                                              "delay = wp.zeros(1, dtype=float)")}
    assert [f.line for f in check_sources(sources, select=["WF403"]).findings] == [12, 23]


def test_a_constant_bound_keeps_its_fix() -> None:
    """The same kernel launched with a literal bound: the static-bound fix is offered and made."""
    sources = {"test_noise.py": NOISE.replace("inputs=[xy, octaves,", "inputs=[xy, 3,")}
    (finding, *_) = check_sources(sources, select=["WF403"]).findings
    assert finding.fix.safety is FixSafety.SAFE
    assert "range(wp.static(3))" in compute_edits(sources, [finding]).new_sources["test_noise.py"]
