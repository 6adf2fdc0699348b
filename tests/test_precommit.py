"""The pre-commit hooks, run by the real ``pre-commit`` against this repository's hook definitions.

``pre-commit try-repo`` needs a git repository with the hook files committed, so the test
copies the package (pyproject, ``warpfix/``, ``codemods/``, ``.pre-commit-hooks.yaml``) into a
temporary repository and commits it there. pre-commit then builds the hook's environment the
way it does for users (``language: python``: a fresh virtualenv and ``pip install .`` of that
repository) and runs the hook's entry point from it.

One shortcut keeps this fast for the heavy dependencies: ``PYTHONPATH`` points at a folder
of links to the packages of the interpreter running the tests (all but warpfix itself, the
codemods, pip and setuptools), so pip finds warp-lang, libcst, numpy and rich already
satisfied instead of downloading them again (warp-lang alone is a 100+ MB wheel). warpfix
is installed from the copied repository into the hook's virtualenv, built by pip in an
isolated build environment (which fetches setuptools from the package index), and the hook
runs the ``warpfix`` console script of that virtualenv. Each ``try-repo`` builds a fresh
environment (about 15 s), hence the ``slow`` mark.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# `y` is allocated without requires_grad, written from `k` and read on the way to the loss: WF201.
BUGGY = """import numpy as np
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = k[0] * x[i]


@wp.kernel
def sq_err(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


n = 64
x = wp.array(np.linspace(0.0, 1.0, n), dtype=float)
target = wp.array(3.0 * np.linspace(0.0, 1.0, n), dtype=float)
k = wp.array([1.0], dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
y = wp.zeros(n, dtype=float)
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
"""
BUG_LINE = 22  # 0-based line of `y = wp.zeros(n, dtype=float)`

HOOK_FILES = ("pyproject.toml", "README.md", "LICENSE", ".pre-commit-hooks.yaml", "warpfix", "codemods")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "warpfix tests",
    "GIT_AUTHOR_EMAIL": "tests@warpfix.invalid",
    "GIT_COMMITTER_NAME": "warpfix tests",
    "GIT_COMMITTER_EMAIL": "tests@warpfix.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, check=True, capture_output=True)


# Not taken from the test interpreter: the package under test and the hook venv's own installer.
_OWN = (
    "warpfix",
    "codemods",
    "__editable__",
    "pip",
    "setuptools",
    "pkg_resources",
    "_distutils_hack",
    "distutils-",
)


@pytest.fixture(scope="module")
def dependencies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Links to the installed third-party packages, for the hook environment's PYTHONPATH."""
    deps = tmp_path_factory.mktemp("deps")
    paths = sysconfig.get_paths()
    for site in dict.fromkeys([paths["purelib"], paths["platlib"]]):
        for entry in Path(site).iterdir():
            if not entry.name.startswith(_OWN) and not (deps / entry.name).exists():
                (deps / entry.name).symlink_to(entry)
    return deps


def _env(tmp_path: Path, dependencies: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT", "VIRTUAL_ENV"))}
    env.update(GIT_ENV)
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    env["PYTHONPATH"] = str(dependencies)
    return env


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed copy of this repository's package and hook definitions."""
    repo = tmp_path_factory.mktemp("hook-repo")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".warpfix_cache")
    for name in HOOK_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=ignore)
        elif src.is_file():
            shutil.copy2(src, repo / name)
    if not (repo / "README.md").exists():  # pyproject names it as the long description
        (repo / "README.md").write_text("warpfix\n")
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "hooks under test"]):
        subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=repo, check=True, env=env)
    return repo


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / "fit.py").write_text(BUGGY)
    _git(project, "add", "fit.py")
    return project


def _try_repo(hook_repo: Path, hook: str, project: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), hook, "--verbose", "--color=never"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
@needs_git
def test_fix_hook_fixes_the_staged_file_and_fails_then_passes(
    hook_repo: Path, dependencies: Path, tmp_path: Path
) -> None:
    project = _project(tmp_path)
    env = _env(tmp_path, dependencies)

    first = _try_repo(hook_repo, "warpfix", project, env)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "files were modified by this hook" in first.stdout
    fixed = (project / "fit.py").read_text()
    assert fixed != BUGGY
    assert fixed.splitlines()[BUG_LINE] == "y = wp.zeros(n, dtype=float, requires_grad=True)"

    _git(project, "add", "fit.py")
    second = _try_repo(hook_repo, "warpfix", project, env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert (project / "fit.py").read_text() == fixed


@pytest.mark.slow
@needs_git
def test_check_hook_reports_and_does_not_modify(hook_repo: Path, dependencies: Path, tmp_path: Path) -> None:
    project = _project(tmp_path)
    env = _env(tmp_path, dependencies)

    run = _try_repo(hook_repo, "warpfix-check", project, env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"fit.py:{BUG_LINE + 1}:5: WF201" in run.stdout
    assert (project / "fit.py").read_text() == BUGGY

    (project / "fit.py").write_text(
        BUGGY.replace("dtype=float)\ntape", "dtype=float, requires_grad=True)\ntape")
    )
    _git(project, "add", "fit.py")
    clean = _try_repo(hook_repo, "warpfix-check", project, env)
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_manifest_is_valid_and_defines_both_hooks() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    from pre_commit.clientlib import load_manifest

    hooks = {hook["id"]: hook for hook in load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}
    assert set(hooks) == {"warpfix", "warpfix-check"}
    assert hooks["warpfix"]["entry"] == "warpfix apply --check-if-configured"
    assert hooks["warpfix-check"]["entry"] == "warpfix check"
    assert all(h["require_serial"] and h["types_or"] == ["python", "jupyter"] for h in hooks.values())


# Only WF202 (`enable_backward=False` on a taped kernel): an error whose fix is unsafe, so the hook cannot fix it.
UNFIXABLE = BUGGY.replace("@wp.kernel\ndef sq_err", "@wp.kernel(enable_backward=False)\ndef sq_err").replace(
    "y = wp.zeros(n, dtype=float)", "y = wp.zeros(n, dtype=float, requires_grad=True)"
)


def _notebook(code: str) -> str:
    import json

    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": part.splitlines(keepends=True)} for part in code.split("\n\n\n")]
    return json.dumps({"cells": cells, "metadata": {"language_info": {"name": "python"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


@pytest.mark.slow
@needs_git
def test_fix_hook_fixes_notebooks_and_fails_while_an_unfixable_error_remains(
    hook_repo: Path, dependencies: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / "unfixable.py").write_text(UNFIXABLE)
    (project / "fit.ipynb").write_text(_notebook(BUGGY))
    _git(project, "add", "unfixable.py", "fit.ipynb")
    env = _env(tmp_path, dependencies)

    first = _try_repo(hook_repo, "warpfix", project, env)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "requires_grad=True" in (project / "fit.ipynb").read_text()  # the notebook was fixed
    assert (project / "unfixable.py").read_text() == UNFIXABLE

    _git(project, "add", "fit.ipynb")
    second = _try_repo(hook_repo, "warpfix", project, env)
    assert second.returncode == 1, second.stdout + second.stderr  # WF202 remains: the commit stays blocked
    assert "files were modified by this hook" not in second.stdout
