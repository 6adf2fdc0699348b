"""Issue 11: the findings do not depend on how the project's path is given.

An installed package ``fakepkg`` (in a folder named ``site-packages`` on the search path, with a
distribution that requires warp-lang, so its calls are followed through library summaries):
``fakepkg/__init__.py`` only re-exports and never mentions warp, ``fakepkg/sim.py`` holds a
hazardous kernel and the helper that launches it, ``fakepkg/tests/test_sim.py`` calls the helper
on a tape through ``import fakepkg``. ``fakepkg/geo`` holds a second hazardous kernel (a WF106 read and
overwrite) that a helper of ``sim.py`` launches for ``geo/use.py``, which tapes it.

Before, ``import fakepkg`` fell to the installed copy's summary (the re-exporting ``__init__`` was
never parsed), whose kernels carry the site-packages path, and ``from .sim import`` in a package's
``__init__`` resolved to nothing when the path was absolute: no form found the taped ``sim.py``
hazard, and the geo hazard was found only when the path was absolute (the summary's kernel path
then happened to be the checked file's), as on newton (four WF106 in absolute form only).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from warpfix.engine import check_paths
from warpfix.model import library
from warpfix.model.project_files import model_texts

INIT = "from .sim import step, step_geo\n"

SIM = '''\
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), s: float):
    i = wp.tid()
    x[i] *= s


def step(x, s):
    wp.launch(scale, x.shape[0], inputs=[x, s])


def step_geo(x, s):
    from fakepkg.geo.kern import geo_scale

    wp.launch(geo_scale, x.shape[0], inputs=[x, s])
'''

TEST_SIM = '''\
import warp as wp

import fakepkg


@wp.kernel
def loss_k(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def test_grad():
    x = wp.ones(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        fakepkg.step(x, 2.0)
        wp.launch(loss_k, 4, inputs=[x, loss])
    tape.backward(loss)
'''

GEO_KERN = SIM.split("\n\ndef step")[0].replace("scale", "geo_scale").replace("x[i] *= s", "x[i] = wp.sin(x[i]) * s") + "\n"

GEO_USE = TEST_SIM.replace("loss_k", "geo_loss").replace("fakepkg.step(", "fakepkg.step_geo(")

EXPECTED = {("sim.py", 7, "WF401", "error"), ("geo/kern.py", 7, "WF106", "error")}


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp/site-packages`` holding fakepkg, on the search path and in a fresh library index."""
    site = tmp_path / "lib" / "site-packages"
    pkg = site / "fakepkg"
    for rel, text in {"__init__.py": INIT, "sim.py": SIM, "tests/__init__.py": "", "tests/test_sim.py": TEST_SIM,
                      "geo/__init__.py": "", "geo/kern.py": GEO_KERN, "geo/use.py": GEO_USE}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    dist = site / "fakepkg-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 0.1\nRequires-Dist: warp-lang\n")
    (dist / "top_level.txt").write_text("fakepkg\n")
    monkeypatch.syspath_prepend(str(site))
    library._uses_warp.cache_clear()
    library._package_version.cache_clear()
    monkeypatch.setattr(library, "_SHARED", library.LibraryIndex(site_dirs=[str(site)],
                                                                 cache_dir=str(tmp_path / "summaries")))
    yield site
    library._uses_warp.cache_clear()
    library._package_version.cache_clear()


def findings(cwd: Path, path: str, pkg: Path) -> set[tuple[str, int, str, str]]:
    """(file relative to the package, line, rule, severity) of ``check PATH`` run from ``cwd``."""
    os.chdir(cwd)
    result = check_paths([path], use_cache=False)
    assert not result.errors
    real_pkg = os.path.realpath(pkg)
    return {(os.path.relpath(os.path.realpath(os.path.join(cwd, f.path)), real_pkg), f.line, f.rule,
             f.severity.value) for f in result.findings}


@pytest.mark.parametrize("form", ["absolute", "relative", "dot-slash", "dot", "subfolder cwd", "symlink"])
def test_installed_package_checked_in_any_path_form(site: Path, tmp_path: Path, form: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = site / "fakepkg"
    monkeypatch.chdir(tmp_path)  # restored after the test, whatever findings() changed it to
    if form == "symlink":
        (tmp_path / "link").symlink_to(site, target_is_directory=True)
    cwd, path = {"absolute": (tmp_path, str(pkg)), "relative": (site, "fakepkg"), "dot-slash": (site, "./fakepkg"),
                 "dot": (pkg, "."), "subfolder cwd": (pkg / "tests", ".."),
                 "symlink": (tmp_path, str(tmp_path / "link" / "fakepkg"))}[form]
    assert findings(cwd, path, pkg) == EXPECTED


@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_subfolder_agrees_with_its_parent(site: Path, form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``check fakepkg/geo``: the geo kernel the rest of the package launches on a tape (through the
    installed copy's summary) is the checked file's kernel, as in ``check fakepkg``."""
    pkg = site / "fakepkg"
    monkeypatch.chdir(site)
    path = str(pkg / "geo") if form == "absolute" else "fakepkg/geo"
    whole = {f for f in findings(site, path.rpartition("/")[0], pkg) if f[0].startswith("geo/")}
    assert findings(site, path, pkg) == whole == {("geo/kern.py", 7, "WF106", "error")}


def test_model_parses_the_packages_modules_that_never_mention_warp(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(INIT)
    (pkg / "sim.py").write_text(SIM)
    (tmp_path / "notes.py").write_text("x = 1\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "__init__.py").write_text("y = 2\n")
    texts = {str(p): p.read_text() for p in (pkg / "__init__.py", pkg / "sim.py", tmp_path / "notes.py",
                                             other / "__init__.py")}
    # a module of a package with warp code is parsed; a loose script or a package without any is not
    assert set(model_texts(texts)) == {str(pkg / "__init__.py"), str(pkg / "sim.py")}


@pytest.mark.parametrize("form", ["parent", "dot", "subfolder cwd", "absolute"])
def test_a_packages_import_of_itself_resolves_from_inside_it(tmp_path: Path, form: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A package that is not installed, checked from inside: ``import mypkg`` in its tests is the
    project's ``mypkg`` even when the module names derived from the paths lack the ``mypkg.`` prefix
    (``cd mypkg && check .`` names ``mypkg/sim.py`` just ``sim``). Before, that form lost the finding."""
    repo = tmp_path / "repo"
    pkg = repo / "mypkg"
    for rel, text in {"__init__.py": INIT.replace(", step_geo", ""), "sim.py": SIM.split("\n\ndef step_geo")[0] + "\n",
                      "tests/__init__.py": "", "tests/test_sim.py": TEST_SIM.replace("fakepkg", "mypkg")}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    (repo / "pyproject.toml").write_text("[project]\nname = 'mypkg'\n")
    monkeypatch.chdir(tmp_path)
    cwd, path = {"parent": (repo, "mypkg"), "dot": (pkg, "."), "subfolder cwd": (pkg / "tests", ".."),
                 "absolute": (tmp_path, str(pkg))}[form]
    assert findings(cwd, path, pkg) == {("sim.py", 7, "WF401", "error")}


AXPY = '''\
import warp as wp


@wp.kernel(enable_backward=False)
def axpy_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = y[i] + x[i]


def add_into(x, y):
    wp.launch(axpy_kernel, x.shape[0], inputs=[x, y])
'''

TEST_AXPY = '''\
import warp as wp

import fakepkg


def test_axpy():
    x = wp.ones(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        fakepkg.add_into(x, y)
    tape.backward(grads={y: wp.ones(4, dtype=float)})
'''


def test_a_librarys_launch_of_its_own_backward_disabled_kernel_is_no_wf202(site: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The checked files hold the kernel (compiled without backward) and a caller that reaches it
    only through the installed copy's summary (its package's ``__init__`` is not checked): the
    library's own launch is its design (warp.fem's ``array_axpy`` records a custom adjoint), not a
    WF202 at the kernel (warp's wheel: ``warp/_src/fem/linalg.py:564`` once the summary's kernel
    was the checked file's)."""
    pkg = site / "fakepkg"
    (pkg / "axpy.py").write_text(AXPY)
    (pkg / "__init__.py").write_text(INIT + "from .axpy import add_into\n")
    (pkg / "tests" / "test_axpy.py").write_text(TEST_AXPY)
    monkeypatch.chdir(site)
    result = check_paths(["fakepkg/axpy.py", "fakepkg/tests/test_axpy.py"], use_cache=False, select=["WF202"])
    assert result.findings == []
