"""Which files ``check``/``apply`` read and with which configuration, and bad input (issue 11 items 4, 5).
Each case runs the real command (``python -m warpfix``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import BUG_LINE, BUGGY, warpfix


def paths_found(proc: subprocess.CompletedProcess[str]) -> set[str]:
    return {os.path.normpath(f["path"]) for f in json.loads(proc.stdout)["findings"]}


def check_json(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return warpfix("check", "--no-cache", "--format", "json", *args, cwd=cwd)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ with a pyproject excluding third_party/ and ignoring WF401 in tests/; a/ and b/ both buggy,
    a/ with its own pyproject ignoring WF401."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.warpfix]\nexclude = ["third_party"]\nper-file-ignores = { "tests/*" = ["WF401"] }\n'
    )
    for folder in ("third_party/lib", "tests", "src", "a", "b"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "m.py").write_text(_own(folder))
    (tmp_path / "a" / "pyproject.toml").write_text('[tool.warpfix]\nignore = ["WF401"]\n')
    return tmp_path


EXPECTED = {"src/m.py", "b/m.py"}


def _own(folder: str) -> str:
    """BUGGY with kernel names of its own (sibling programs must not share names here)."""
    tag = folder.replace("/", "_")
    return BUGGY.replace("scale", f"scale_{tag}").replace("loss_k", f"loss_{tag}")


@pytest.mark.parametrize("form", ["none", "dot", "dot-slash", "absolute"])
def test_exclude_and_per_file_ignores_whatever_the_path_form(tree: Path, form: str) -> None:
    args = {"none": [], "dot": ["."], "dot-slash": ["./src", "./tests", "./third_party", "./a", "./b"],
            "absolute": [str(tree)]}[form]
    proc = check_json(tree, *args)
    found = {os.path.relpath(os.path.join(tree, p), tree) for p in paths_found(proc)}
    assert found == EXPECTED


def test_from_a_subfolder(tree: Path) -> None:
    proc = check_json(tree / "tests", "..")
    assert {os.path.relpath(os.path.normpath(os.path.join(tree / "tests", p)), tree) for p in paths_found(proc)} \
        == EXPECTED
    assert check_json(tree / "tests", "m.py").returncode == 0  # per-file-ignores from the subfolder too


def test_nearest_pyproject_per_file(tree: Path) -> None:
    for order in (["b", "a"], ["a", "b"]):
        assert paths_found(check_json(tree, *order)) == {"b/m.py"}


def test_apply_leaves_excluded_files_alone(tree: Path) -> None:
    proc = warpfix("apply", "--no-cache", ".", cwd=tree)
    assert proc.returncode == 1
    for folder in ("third_party/lib", "a", "tests"):
        assert (tree / folder / "m.py").read_text() == _own(folder), folder
    assert (tree / "src" / "m.py").read_text() != _own("src")


def test_skipped_files_are_counted_in_the_summary(tree: Path) -> None:
    proc = warpfix("check", "--no-cache", ".", cwd=tree)
    assert "Skipped 1 file (1 excluded)" in proc.stdout


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@needs_git
def test_gitignore_is_respected_in_a_git_repository(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("generated/\nscratch.py\n")
    for rel in ("generated/g.py", "scratch.py", "main.py"):
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(BUGGY)
    assert paths_found(check_json(tmp_path, ".")) == {"main.py"}
    text = warpfix("check", "--no-cache", ".", cwd=tmp_path).stdout
    assert "Skipped 2 files (2 ignored by git)" in text
    # a file named on the command line is checked even when git ignores it (like ruff)
    assert paths_found(check_json(tmp_path, "scratch.py")) == {"scratch.py"}
    assert paths_found(check_json(tmp_path, "generated")) == {"generated/g.py"}  # so is an ignored folder
    # without git on PATH: no gitignore, every file is checked
    bin_dir = tmp_path / "bin-without-git"
    bin_dir.mkdir()
    proc = warpfix("check", "--no-cache", "--format", "json", ".", cwd=tmp_path, PATH=str(bin_dir))
    assert paths_found(proc) == {"main.py", "scratch.py", "generated/g.py"}


def test_virtualenvs_by_pyvenv_cfg_not_by_name(tmp_path: Path) -> None:
    for folder in ("env", "venv", "myvenv"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.py").write_text(BUGGY)
    (tmp_path / "myvenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert paths_found(check_json(tmp_path, ".")) == {"env/m.py", "venv/m.py"}
    assert "Skipped 1 virtualenv." in warpfix("check", "--no-cache", ".", cwd=tmp_path).stdout


def test_a_fifo_never_hangs(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text(BUGGY)
    os.mkfifo(tmp_path / "x.py")
    walked = warpfix("check", "--no-cache", ".", cwd=tmp_path, timeout=60)
    assert walked.returncode == 1 and f"main.py:{BUG_LINE}:5" in walked.stdout
    given = warpfix("check", "--no-cache", "x.py", "main.py", cwd=tmp_path, timeout=60)
    assert given.returncode == 2 and "x.py: cannot read: not a regular file" in given.stderr
    applied = warpfix("apply", "--no-cache", ".", cwd=tmp_path, timeout=60)
    assert applied.returncode == 1 and (tmp_path / "main.py").read_text() != BUGGY


def test_deep_nesting_is_a_one_line_error(tmp_path: Path) -> None:
    terms = " + ".join(f"x[{i % 4}]" for i in range(1500))
    (tmp_path / "deep.py").write_text(
        "import warp as wp\n\n@wp.kernel\ndef k(x: wp.array(dtype=float), y: wp.array(dtype=float)):\n"
        f"    i = wp.tid()\n    y[i] = {terms}\n"
    )
    (tmp_path / "main.py").write_text(BUGGY)
    proc = warpfix("check", "--no-cache", ".", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert "deep.py" in proc.stderr and "nesting too deep" in proc.stderr
    assert f"main.py:{BUG_LINE}:5: WF401" in proc.stdout


def test_newer_python_syntax_names_the_version(tmp_path: Path) -> None:
    (tmp_path / "new.py").write_text("import warp as wp\n\ntype Vec = list[float]\n\ndef first[T](xs: list[T]) -> T:\n"
                                     "    return xs[0]\n")
    proc = warpfix("check", "--no-cache", "new.py", cwd=tmp_path)
    if sys.version_info >= (3, 12):
        assert proc.returncode == 0
    else:
        assert proc.returncode == 2
        assert f"parsed as Python {sys.version_info[0]}.{sys.version_info[1]}" in proc.stderr
        assert proc.stderr.count("\n") == 1
