"""The engine's performance machinery changes no result: parse reuse and forked rule workers."""

from __future__ import annotations

from pathlib import Path

from tests.test_lsp import BUGGY
from warpfix import engine
from warpfix.engine import PARALLEL_MIN_FILES, ParseCache, check_paths, check_sources


def test_parse_cache_reuses_a_parse_only_for_the_same_text() -> None:
    cache = ParseCache(size=2)
    first, _ = cache.parse("a.py", BUGGY)
    again, _ = cache.parse("a.py", BUGGY)
    assert first is not None and again is first
    changed, _ = cache.parse("a.py", BUGGY + "\nz = 1\n")
    assert changed is not first and changed.text.endswith("z = 1\n")
    broken, err = cache.parse("b.py", "def (")
    assert broken is None and err.startswith("syntax error")
    cache.parse("c.py", "x = 1\n")  # a third path: the least recently used one (a.py) goes
    assert cache.parse("a.py", BUGGY + "\nz = 1\n")[0] is not changed


def test_checks_through_a_parse_cache_find_the_same() -> None:
    cache = ParseCache()
    plain = check_sources({"fit.py": BUGGY})
    for _ in range(2):
        cached = check_sources({"fit.py": BUGGY}, parse_cache=cache)
        assert [f.to_json() for f in cached.findings] == [f.to_json() for f in plain.findings]
    assert [f.rule for f in plain.findings] == ["WF201"]


def test_forked_rule_workers_give_the_same_findings(tmp_path: Path, monkeypatch) -> None:
    forks = []
    real = engine._check_forked
    monkeypatch.setattr(engine, "_check_forked", lambda *a: forks.append(1) or real(*a))
    # enough files for the workers to start; two of them with a finding
    for k in range(PARALLEL_MIN_FILES + 2):
        text = BUGGY if k in (3, 17) else f"import warp as wp\n\nX_{k} = wp.constant({k})\n"
        (tmp_path / f"m{k:02d}.py").write_text(text)
    serial = check_paths([str(tmp_path)], jobs=1, use_cache=False)
    assert not forks
    forked = check_paths([str(tmp_path)], jobs=2, use_cache=False)
    assert forks, "the rules ran in workers"
    assert [f.to_json() for f in forked.findings] == [f.to_json() for f in serial.findings]
    assert sorted({f.path for f in serial.findings}) == [str(tmp_path / "m03.py"), str(tmp_path / "m17.py")]
