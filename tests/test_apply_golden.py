"""Golden cases: ``apply`` on each ``buggy/`` program yields exactly its ``fixed/`` program.

Only the cases that ship a ``fixed/`` folder are compared (WF601 aside: its codemod has its own
issue and tests), with the fixes of their own rule
(other rules' findings in the same program belong to other cases); the fixed program must
then hold no fixable finding of that rule, so a second apply is a no-op.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from codemods import COMMANDS
from tests.conftest import REPO
from warpfix.apply import Selection, plan_fixes
from warpfix.engine import parse_version

GOLDEN = REPO / "golden"


def _cases(refused: bool = False) -> list:
    """The cases whose ``fixed/`` is ``apply``'s rewrite (``refused``: those whose codemod refuses,
    ``"refused"`` in case.json giving the reason, and whose ``fixed/`` is by hand)."""
    out = []
    for case in sorted(GOLDEN.glob("WF*/case.json")):
        folder = case.parent
        if (folder / "fixed").is_dir() and (folder / "buggy").is_dir():
            spec = json.loads(case.read_text(encoding="utf-8"))
            rule = spec["rule"]
            if rule not in COMMANDS:  # no rewrite (WF804 is found at run time): fixed/ is by hand
                continue
            if ("refused" in spec) != refused:
                continue
            if refused:
                out.append(pytest.param(folder, rule, spec["refused"], id=folder.name))
                continue
            version = parse_version(spec["warp_version"]) if spec.get("warp_version") else None
            out.append(pytest.param(folder, rule, version, id=folder.name))
    return out


def _texts(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.py"))}


@pytest.mark.parametrize(("folder", "rule", "version"), _cases())
def test_apply_matches_fixed(
    folder: Path, rule: str, version: tuple[int, ...] | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "buggy"
    shutil.copytree(folder / "buggy", work)
    monkeypatch.chdir(work)
    result = plan_fixes(["."], selection=Selection(select=[rule], use_cache=False, warp_version=version))
    assert result.errors == []
    fixed = {**_texts(work), **{Path(p).as_posix(): t for p, t in result.changed.items()}}
    assert fixed == _texts(folder / "fixed"), [(e.finding.rule, e.finding.line, e.reason) for e in result.edits]
    assert not [e for e in result.edits if not e.kept and e.finding.rule == rule]


@pytest.mark.parametrize(("folder", "rule", "why"), _cases(refused=True))
def test_apply_refuses_where_the_fix_is_by_hand(
    folder: Path, rule: str, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WF106-graph-captured: the launch runs in a graph capture, which would never replay the
    rebinding the codemod makes; ``apply`` changes nothing and says why."""
    work = tmp_path / "buggy"
    shutil.copytree(folder / "buggy", work)
    monkeypatch.chdir(work)
    result = plan_fixes(["."], selection=Selection(select=[rule], use_cache=False))
    assert result.errors == [] and result.changed == {}
    reasons = [e.reason for e in result.edits if e.finding.rule == rule]
    assert reasons and all(why in r for r in reasons), reasons
