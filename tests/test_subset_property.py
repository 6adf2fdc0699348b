"""Issue 11, "the result depends on what is given": for every sub-folder S of a package P,
``check S`` reports nothing about the code that ``check P`` does not (same rule, file, line, and no
error where ``check P`` says warning). A finding of ``check P`` that needs a caller outside S (a
tape in ``P/tests`` reaching a kernel of S) may be missing from ``check S`` (README, "Checking a
sub-folder"). ``bench/subset.py`` checks the same property on newton and warp.

The package: ``geo/kern.py`` holds a hazardous kernel that only ``tests/`` tapes; ``geo/untaped.py``
one that no tape records (in a package that records elsewhere: no finding, in any form; were
``check pkg/geo`` blind to the tapes of the rest of the package, it would warn, as for a library);
``sim/`` a hazard and the tape recording it; ``geo/helpers.py`` launches a kernel of ``sim/`` into
arrays its caller passes (fresh ones, from ``tests/``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from warpfix.engine import check_paths

sys.path.insert(0, str(REPO))
from bench.subset import compare, keyed  # noqa: E402

KERN = '''\
import warp as wp


@wp.kernel
def squash(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = wp.tanh(x[i])


def run_squash(x):
    wp.launch(squash, x.shape[0], inputs=[x])
'''

UNTAPED = '''\
import warp as wp


@wp.kernel
def damp(x: wp.array(dtype=float), c: float):
    i = wp.tid()
    x[i] *= c
'''

STEP = '''\
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), s: float):
    i = wp.tid()
    x[i] *= s


@wp.kernel
def advance(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 0.5
'''

TRAIN = '''\
import warp as wp

from pkg.sim.step import scale


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])


def train():
    x = wp.ones(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, 4, inputs=[x, 2.0])
        wp.launch(total, 4, inputs=[x, loss])
    tape.backward(loss)
'''

HELPERS = '''\
import warp as wp

from pkg.sim.step import advance


def advance_into(x, y):
    wp.launch(advance, x.shape[0], inputs=[x], outputs=[y])
'''

TEST_GEO = '''\
import warp as wp

from pkg.geo.helpers import advance_into
from pkg.geo.kern import run_squash


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])


def test_grad():
    x = wp.ones(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        advance_into(x, y)
        run_squash(y)
        wp.launch(total, 4, inputs=[y, loss])
    tape.backward(loss)
'''

FILES = {"__init__.py": "", "geo/__init__.py": "", "geo/kern.py": KERN, "geo/untaped.py": UNTAPED,
         "geo/helpers.py": HELPERS, "sim/__init__.py": "", "sim/step.py": STEP, "sim/train.py": TRAIN,
         "tests/__init__.py": "", "tests/test_geo.py": TEST_GEO}


def report(path: str) -> list[dict]:
    result = check_paths([path], use_cache=False)
    assert not result.errors
    return [f.to_json() for f in result.findings]


def subset_violations(root: Path, package: str) -> dict[str, dict]:
    """``bench.subset.compare`` of each immediate sub-folder of ``root/package`` against the package."""
    os.chdir(root)
    whole = keyed(report(package), root)
    out = {}
    for sub in sorted(p for p in (root / package).iterdir() if p.is_dir() and not p.name.startswith("__")):
        folder = f"{package}/{sub.name}"
        out[folder] = compare(whole, keyed(report(folder), root), folder)
    return out


@pytest.mark.slow
def test_each_sub_folder_reports_a_subset_of_its_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rel, text in FILES.items():
        (tmp_path / "pkg" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / rel).write_text(text)
    monkeypatch.chdir(tmp_path)
    whole = keyed(report("pkg"), tmp_path)
    # the package's own findings: the taped hazards, and nothing in code no tape records
    assert whole == {("WF106", "pkg/geo/kern.py", 7): "error", ("WF401", "pkg/sim/step.py", 7): "error"}
    results = subset_violations(tmp_path, "pkg")
    assert {k: v["extra"] + v["stronger"] for k, v in results.items()} == {
        "pkg/geo": [], "pkg/sim": [], "pkg/tests": []}, json.dumps(results, default=list)
    # only tests/ tapes the geo kernel: `check pkg/geo` may not see that (the documented policy)
    assert results["pkg/geo"]["missing"] == [("WF106", "pkg/geo/kern.py", 7)]
    assert results["pkg/sim"]["missing"] == []


def test_a_packages_own_test_of_its_installed_solver_reports_nothing_at_the_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``check newton/tests`` replays newton's featherstone solver from its library summary; the
    solver's own in-place chaining (``state_in.joint_q`` rewritten after the previous step wrote
    it) was reported as a WF104 warning at the test's ``solver.step(...)`` line, which ``check
    newton`` (measured with bench/subset.py) does not report: it follows the solver as the
    project's code and reports the chaining at the solver's own lines."""
    newton = pytest.importorskip("newton")
    site = Path(newton.__file__).parent.parent
    monkeypatch.chdir(site)
    assert [(f["rule"], f["line"]) for f in report("newton/tests/featherstone/test_tile_gemm.py")] == []
