"""Per-file summaries cached on disk (issue 12): a check of a large project reads again only the
files that changed; every other file's summary and kernel facts come from the cache, and the
findings are those of a check that reads every file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.test_lsp import BUGGY
from warpfix import reading, result_cache
from warpfix.engine import check_paths
from warpfix.model import file_cache
from warpfix.model.file_cache import FileCache

_HELPER = """
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


def make(n):
    return wp.zeros(n, dtype=float, requires_grad=True)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project checked in release mode (every tree released), with its own cache folder."""
    monkeypatch.setenv("WARPFIX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(reading, "RELEASE_ABOVE_BYTES", -1)
    root = tmp_path / "proj"
    root.mkdir()
    (root / "fit.py").write_text(BUGGY)
    for k in range(3):
        (root / f"helper{k}.py").write_text(_HELPER)
    monkeypatch.chdir(tmp_path)
    return root


def _loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Record each cache look-up: (path, hit)."""
    seen: list[tuple[str, bool]] = []
    real = FileCache.load

    def load(self, path, text, module_name):
        hit = real(self, path, text, module_name)
        seen.append((os.path.basename(path), hit is not None))
        return hit

    monkeypatch.setattr(FileCache, "load", load)
    return seen


def _check(root: Path) -> list[dict]:
    # the result cache is off: only the file cache can spare work
    real = result_cache.load
    result_cache.load = lambda key: None
    try:
        return [f.to_json() for f in check_paths([str(root)]).findings]
    finally:
        result_cache.load = real


def test_a_second_check_reads_no_unchanged_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _check(project)
    assert [f["rule"] for f in first] == ["WF201"]
    seen = _loads(monkeypatch)
    again = _check(project)
    assert again == first
    assert sorted(seen) == sorted((p.name, True) for p in project.glob("*.py"))


def test_a_changed_file_is_read_again_and_its_findings_change(project: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _check(project)
    fixed = BUGGY.replace("y = wp.zeros(n, dtype=float)", "y = wp.zeros(n, dtype=float, requires_grad=True)")
    assert fixed != BUGGY
    (project / "fit.py").write_text(fixed)
    seen = _loads(monkeypatch)
    assert _check(project) == []
    assert ("fit.py", False) in seen and sum(hit for _, hit in seen) == 3
    with monkeypatch.context() as mp:
        mp.setenv("WARPFIX_CACHE_DIR", "")  # off: what every file's own reading gives
        assert _check(project) == []


def test_a_broken_or_foreign_entry_is_a_miss(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _check(project)
    folder = Path(file_cache.cache_dir() or "")
    entries = sorted(folder.rglob("*.pickle"))
    assert len(entries) == 4
    entries[0].write_bytes(b"not a pickle")
    seen = _loads(monkeypatch)
    assert _check(project) == first
    assert sum(not hit for _, hit in seen) == 1


def test_the_cache_lives_outside_the_project(project: Path) -> None:
    _check(project)
    assert not list(project.rglob("*.pickle"))
    assert not list((project.parent / ".warpfix_cache").rglob("*.pickle"))


def test_a_new_version_of_the_code_clears_the_old_entries(project: Path) -> None:
    _check(project)
    base = Path(file_cache.cache_dir() or "")
    old = [p for p in base.iterdir() if p.is_dir()]
    assert len(old) == 1
    cache = FileCache("another version of warpfix")
    src, err = reading.parse_and_release(str(project / "fit.py"), (project / "fit.py").read_text())
    assert src is not None, err
    cache.store(src)
    assert [p for p in base.iterdir() if p.is_dir()] == [Path(cache.folder or "")]


def test_files_read_in_forked_workers_give_the_same_findings(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--jobs 2`` on a large project: the files are read in two forked processes, which send back
    each file's summary and write the cache; findings and order are a single process's."""
    for k in range(reading.PARALLEL_MIN_FILES):
        (project / f"more{k:02d}.py").write_text(_HELPER.replace("def make", f"def make{k}"))
    forks = []
    real = reading.scan_forked
    monkeypatch.setattr(reading, "scan_forked", lambda *a: forks.append(1) or real(*a))
    monkeypatch.setenv("WARPFIX_CACHE_DIR", "")  # every file read: by the workers, then by one process
    forked = [f.to_json() for f in check_paths([str(project)], jobs=2, use_cache=False).findings]
    assert forks, "the files were read in workers"
    serial = [f.to_json() for f in check_paths([str(project)], jobs=1, use_cache=False).findings]
    assert forked == serial and [f["rule"] for f in serial] == ["WF201"]
    monkeypatch.setenv("WARPFIX_CACHE_DIR", str(project.parent / "cache2"))
    check_paths([str(project)], jobs=2)  # the workers write the cache
    seen = _loads(monkeypatch)
    assert _check(project) == serial
    assert seen and all(hit for _, hit in seen)
