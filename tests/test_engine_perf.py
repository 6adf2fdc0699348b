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


def _many_roots(n: int) -> str:
    """BUGGY's training step as ``n`` functions: one trace (and one WF201 finding) each."""
    head, _, body = BUGGY.partition("n = 64\n")
    steps = "".join(f"\n\ndef fit_{k}(n: int):\n" + "".join(f"    {line}\n" if line else "\n"
                                                               for line in ("n = 64\n" + body).splitlines())
                    for k in range(n))
    return head + steps


def test_the_check_streams_the_traces_and_drops_each_one(monkeypatch) -> None:
    """The engine never keeps every trace (``Project.traces``): each trace is shown to the rules and
    the trace summary, and is gone (collected, cycles included) before the next root is traced.
    The findings are those of each rule run alone over the kept traces."""
    import gc
    import weakref

    from warpfix.model import Project

    text = _many_roots(6)
    alone = check_sources({"fit.py": text})
    assert [f.rule for f in alone.findings] == ["WF201"] * 6

    def kept(self):
        raise AssertionError("the engine kept every trace")

    monkeypatch.setattr(Project, "traces", property(kept))
    real = Project.iter_traces
    seen: list[weakref.ref] = []
    alive_at_yield: list[int] = []

    def counted(self, every_root=False):
        for trace in real(self, every_root):
            gc.collect(0)  # what the collector of the tracing pass would free by now
            alive_at_yield.append(sum(ref() is not None for ref in seen))
            seen.append(weakref.ref(trace))
            yield trace
            del trace

    monkeypatch.setattr(Project, "iter_traces", counted)
    streamed = check_sources({"fit.py": text})
    assert [f.to_json() for f in streamed.findings] == [f.to_json() for f in alone.findings]
    assert len(seen) >= 6 and alive_at_yield == [0] * len(seen), alive_at_yield


def test_the_check_freezes_without_walking_the_permanent_generation(monkeypatch) -> None:
    """``gc.get_freeze_count`` walks every frozen object (70 ms per change in a language server
    holding a folder of parses): the check counts its own nested freezes instead, and still leaves
    nothing frozen and the collector as it was."""
    import gc

    from warpfix.model import gc_frozen

    def walked() -> int:
        raise AssertionError("gc.get_freeze_count walks the permanent generation")

    with monkeypatch.context() as m:
        m.setattr(gc, "get_freeze_count", walked)
        found = check_sources({"fit.py": _many_roots(2)})
    assert [f.rule for f in found.findings] == ["WF201"] * 2
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    with gc_frozen():
        with gc_frozen():
            pass
        assert gc.get_freeze_count() > 0  # the inner block leaves the outer one's freeze
    assert gc.get_freeze_count() == 0
