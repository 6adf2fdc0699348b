"""A check of a large project releases each file's syntax tree once the file is summarised
(:meth:`warpfix.model.source.SourceFile.scan`), and parses it again only where an analysis looks
into it (issue 12: memory follows what the analyses read). That must change no finding: every
golden variant and every rule example, checked with every tree released, gives what a check that
keeps the trees gives."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from warpfix import reading
from warpfix.engine import check_paths, parse_version
from warpfix.model.source import SourceFile
from warpfix.rules import all_rules

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def _both(monkeypatch: pytest.MonkeyPatch, folder: Path, version: tuple[int, ...] | None = None):
    """The findings of ``check_paths`` in ``folder`` keeping the trees, and releasing them all."""
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        kept = [f.to_json() for f in check_paths(["."], use_cache=False, warp_version=version).findings]
        with monkeypatch.context() as mp:
            mp.setattr(reading, "RELEASE_ABOVE_BYTES", -1)
            released = [f.to_json() for f in check_paths(["."], use_cache=False, warp_version=version).findings]
    finally:
        os.chdir(cwd)
    return kept, released


def test_releasing_the_trees_changes_no_golden_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    parses = []
    real = SourceFile.tree.fget

    def counted(self):  # a parse of a released file's text
        if self._tree is None:
            parses.append(self.path)
        return real(self)

    monkeypatch.setattr(SourceFile, "tree", property(counted))
    for case_dir in sorted(GOLDEN.iterdir()):
        case_file = case_dir / "case.json"
        if not case_file.is_file():
            continue
        case = json.loads(case_file.read_text())
        version = parse_version(case["warp_version"]) if "warp_version" in case else None
        for variant in case["variants"]:
            kept, released = _both(monkeypatch, case_dir / variant, version)
            assert released == kept, f"{case_dir.name}/{variant}"
    assert parses, "the released trees were parsed again where the check looked into them"


def test_releasing_the_trees_changes_no_finding_of_a_rule_example(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    for rule in all_rules():
        for k, ex in enumerate([*rule.VALID, *rule.INVALID]):
            folder = tmp_path / f"{rule.id}-{k}"
            sources = {"main.py": ex.code} if isinstance(ex.code, str) else dict(ex.code)
            for rel, text in sources.items():
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_text(text)
            version = parse_version(ex.warp_version) if ex.warp_version else None
            kept, released = _both(monkeypatch, folder, version)
            assert released == kept, (rule.id, k)


def test_a_released_file_is_parsed_again_from_its_text() -> None:
    src = SourceFile.parse("m.py", "import warp as wp\n\n\ndef f(x):\n    return x\n")
    src.scan()
    first = src.tree.body[1]
    src.release()
    assert not src.materialized
    again = src.definition_at(4, 0)
    assert again is not first and again.name == "f" and src.materialized
    assert src.summary.roots == [(("m.py", 4, 0), ())]  # the summary outlives the tree
