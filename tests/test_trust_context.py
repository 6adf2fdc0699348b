"""Issue 11: what `check` reports for a folder does not depend on whether its parent was given.

A package ``pkg`` whose trainer (``pkg/train.py``) records launches on a tape, with two
sub-packages: ``pkg/geo`` holds a hazardous kernel no tape records (the reach policy keeps it
silent in a program that records on a tape), ``pkg/sim`` one that its own trainer launches on a
tape (an error). Checking either sub-package alone, by folder or by absolute file paths, gives
the findings that checking ``pkg`` gives for its files. Before, ``check pkg/geo`` saw no tape at
all and warned about the untaped kernel (172 such warnings on ``newton/_src/geometry``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from warpfix.engine import check_paths
from warpfix.model.taped import package_root

GEO_KERNELS = '''\
import warp as wp


@wp.kernel
def product(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    p = float(1.0)
    for j in range(n):
        p = p * x[j]
    out[0] = p


def untaped_product(x, out):
    wp.launch(product, dim=1, inputs=[x, x.shape[0], out])
'''

SIM_KERNELS = GEO_KERNELS.replace("product", "taped_product")

SIM_FIT = '''\
import warp as wp

from .kernels import taped_product


def fit(x, out):
    tape = wp.Tape()
    with tape:
        wp.launch(taped_product, dim=1, inputs=[x, x.shape[0], out])
    tape.backward(out)
    return x.grad
'''

TRAIN = '''\
import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def train(x, y):
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=x.shape[0], inputs=[x], outputs=[y])
    tape.backward(grads={y: wp.ones_like(y)})
'''


def _tree(root: Path, with_package: bool = True) -> Path:
    pkg = root / "pkg"
    for sub in ("geo", "sim"):
        (pkg / sub).mkdir(parents=True)
        if with_package:
            (pkg / sub / "__init__.py").write_text("")
    if with_package:
        (pkg / "__init__.py").write_text("")
    (pkg / "geo" / "kernels.py").write_text(GEO_KERNELS)
    (pkg / "sim" / "kernels.py").write_text(SIM_KERNELS)
    (pkg / "sim" / "fit.py").write_text(SIM_FIT)
    (pkg / "train.py").write_text(TRAIN)
    return pkg


def _under(findings: list, folder: Path) -> list[tuple[str, str, int, str, bool]]:
    prefix = str(folder.resolve()) + os.sep
    return sorted(
        (os.path.relpath(os.path.abspath(f.path), folder), f.rule, f.line, f.severity.value, f.data.get("taped"))
        for f in findings
        if os.path.abspath(f.path).startswith(prefix)
    )


def test_sub_folder_reports_what_its_parent_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    whole = check_paths(["pkg"], use_cache=False).findings
    # the kernel launched on a tape (in its own sub-package) is an error; the never-taped one is silent
    assert [f for f in _under(whole, pkg) if f[1] == "WF403"] == [("sim/kernels.py", "WF403", 8, "error", True)]
    for sub in ("geo", "sim"):
        parent = _under(whole, pkg / sub)
        assert _under(check_paths([f"pkg/{sub}"], use_cache=False).findings, pkg / sub) == parent, sub
        given = [str(p) for p in sorted((pkg / sub).glob("*.py"))]  # absolute paths, files only
        assert _under(check_paths(given, use_cache=False).findings, pkg / sub) == parent, sub


def test_a_tape_the_model_cannot_follow_decides_alike_for_parent_and_sub_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer launches through a table the model does not resolve: no launch is seen recorded
    in either run, yet the package creates a tape, so neither run warns about the untaped kernel."""
    pkg = _tree(tmp_path)
    (pkg / "sim" / "fit.py").unlink()
    (pkg / "train.py").write_text(TRAIN.replace("wp.launch(square,", "wp.launch(KERNELS[0],")
                                  + "\n\nKERNELS = [square]\n")
    monkeypatch.chdir(tmp_path)
    parent = _under(check_paths(["pkg"], use_cache=False).findings, pkg / "geo")
    assert parent == _under(check_paths(["pkg/geo"], use_cache=False).findings, pkg / "geo") == []


def test_without_an_enclosing_package_a_tapeless_folder_is_a_library(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``__init__.py``: the given folder is the whole program. ``geo`` records nothing, so its
    kernels are a library someone else may differentiate: warnings (RULES.md)."""
    pkg = _tree(tmp_path, with_package=False)
    monkeypatch.chdir(tmp_path)
    assert package_root(str(pkg / "geo" / "kernels.py")) is None
    sub = _under(check_paths(["pkg/geo"], use_cache=False).findings, pkg / "geo")
    assert [f for f in sub if f[1] == "WF403"] == [("kernels.py", "WF403", 8, "warning", False)]


def test_package_root_is_the_top_most_package(tmp_path: Path) -> None:
    pkg = _tree(tmp_path)
    assert package_root(str(pkg / "geo" / "kernels.py")) == str(pkg)
    assert package_root(str(pkg / "train.py")) == str(pkg)
    assert package_root(str(tmp_path / "script.py")) is None
    # a folder without __init__.py inside a package is a namespace package (newton/_src/geometry)
    (pkg / "_src" / "geometry").mkdir(parents=True)
    (pkg / "_src" / "geometry" / "__init__.py").write_text("")
    assert package_root(str(pkg / "_src" / "geometry" / "mpr.py")) == str(pkg)
    # the search stops at the project's root: an __init__.py above it is another project's
    (tmp_path / "__init__.py").write_text("")
    (pkg / "pyproject.toml").write_text("")
    assert package_root(str(pkg / "geo" / "kernels.py")) == str(pkg)


def test_the_result_cache_sees_a_tape_appear_elsewhere_in_the_package(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``check pkg/geo`` depends on files it was not given: a cached result must not outlive them."""
    pkg = _tree(tmp_path)
    for trainer in (pkg / "train.py", pkg / "sim" / "fit.py"):
        trainer.write_text(trainer.read_text().replace("wp.Tape()", "None"))
    monkeypatch.chdir(tmp_path)

    def geo() -> list[tuple[str, str, int, str, bool]]:
        return [f for f in _under(check_paths(["pkg/geo"]).findings, pkg / "geo") if f[1] == "WF403"]

    assert geo() == [("kernels.py", "WF403", 8, "warning", False)]  # no tape anywhere: a library
    (pkg / "train.py").write_text(TRAIN)
    assert geo() == []
    assert check_paths(["pkg/geo"]).cached
