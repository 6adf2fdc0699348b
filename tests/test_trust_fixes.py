"""Issue 11, the fixes every front end offers (SARIF ``fixes``, the editor's fix-all through
``fix_changes``): none in code no tape records, and none in a sibling program that only shares a
kernel's name. ``apply`` itself is covered by tests/test_apply.py and test_apply_warp_sources.py.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import textwrap
from pathlib import Path

import pytest
import warp

from tests.test_apply import _BUGGY_RUN, _BUGGY_SIM, _CLEAN_RUN, _CLEAN_SIM, _program
from tests.test_apply_warp_sources import UNTAPED_LIBRARY
from warpfix.cli import main
from warpfix.engine import check_paths
from warpfix.finding import Fix, FixSafety
from warpfix.model.taped import UNTAPED
from warpfix.report.base import count_fixable
from warpfix.report.fixedits import fix_changes


def _sarif(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    main(["check", "--format", "sarif", "--no-cache", *args])
    return json.loads(capsys.readouterr().out)["runs"][0]["results"]


def _changed_uris(results: list[dict]) -> set[str]:
    return {
        change["artifactLocation"]["uri"]
        for r in results
        for fix in r.get("fixes", [])
        for change in fix.get("artifactChanges", [])
    }


def test_no_fix_is_offered_in_code_no_tape_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy2(Path(warp.__file__).parent / "_src/optim/adam.py", tmp_path / "adam.py")
    (tmp_path / "eig.py").write_text(UNTAPED_LIBRARY, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = check_paths(["."], use_cache=False)
    # findings whose rule has a fix, which check marks neither [*] nor [-]: it says why instead
    untaped = [f for f in result.findings if f.data.get("no_edit") == UNTAPED]
    assert untaped, "the library has no finding a fix would apply to any more: the test proves nothing"
    assert all(f.data.get("taped") is False and f.fix.safety is FixSafety.NONE for f in untaped)
    assert all(f.fix.description.endswith(f"; not automatic: {UNTAPED}") for f in untaped)
    assert count_fixable(result.findings) == (0, 0)
    # the editor's fix-all and quick fixes, even when offered them as safe fixes
    offered = [dataclasses.replace(f, fix=Fix(FixSafety.SAFE, f.fix.description)) for f in untaped]
    assert fix_changes(result.sources, offered, unsafe=True) == {}
    results = _sarif(capsys, ".")
    assert {r["ruleId"] for r in results} >= {f.rule for f in untaped}
    assert _changed_uris(results) == set()


def test_sarif_fixes_touch_only_the_program_that_launches_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two buggy copies (packages) and a clean program with a same-named kernel in a sibling folder."""
    for k in range(2):
        _program(tmp_path / f"buggy{k}", _BUGGY_SIM, _BUGGY_RUN.replace("from sim", "from .sim"))
        (tmp_path / f"buggy{k}" / "__init__.py").write_text("")
    _program(tmp_path / "clean", _CLEAN_SIM, _CLEAN_RUN)
    monkeypatch.chdir(tmp_path)
    results = [r for r in _sarif(capsys, "--select", "WF401", ".") if r["ruleId"] == "WF401"]
    assert len(results) == 2
    for r in results:
        (fix,) = r["fixes"]
        folder = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].split("/")[0]
        uris = {c["artifactLocation"]["uri"] for c in fix["artifactChanges"]}
        assert uris == {f"{folder}/sim.py", f"{folder}/run.py"}, uris
    assert (tmp_path / "clean" / "sim.py").read_text() == textwrap.dedent(_CLEAN_SIM)


def test_the_text_report_says_why_an_untaped_finding_has_no_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "eig.py").write_text(UNTAPED_LIBRARY, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    main(["check", "--no-cache", "--no-color", "."])
    out = capsys.readouterr().out
    assert f"; not automatic: {UNTAPED}" in out and "[*]" not in out and "fixable with" not in out
