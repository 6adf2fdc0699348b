"""Golden cases: `warpfix check` on each variant folder reports exactly the expected findings
(all rules at once), and every variant program runs (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warpfix.engine import check_paths, parse_version

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def _cases():
    for case_dir in sorted(GOLDEN.iterdir()):
        case_file = case_dir / "case.json"
        if not case_file.is_file():
            continue
        case = json.loads(case_file.read_text())
        for variant in case["variants"]:
            yield pytest.param(case_dir, case, variant, id=f"{case_dir.name}/{variant}")


CASES = list(_cases())


def _findings(case_dir: Path, case: dict, variant: str) -> set[str]:
    version = parse_version(case["warp_version"]) if "warp_version" in case else None
    cwd = os.getcwd()
    os.chdir(case_dir / variant)
    try:
        result = check_paths(["."], use_cache=False, warp_version=version)
    finally:
        os.chdir(cwd)
    assert not result.errors, result.errors
    return {f"{os.path.normpath(f.path)}:{f.line}:{f.rule}" for f in result.findings}


@pytest.mark.parametrize(("case_dir", "case", "variant"), CASES)
def test_golden_findings(case_dir: Path, case: dict, variant: str) -> None:
    assert (case_dir / variant).is_dir(), f"{variant} listed in case.json but missing"
    assert _findings(case_dir, case, variant) == set(case["variants"][variant])


def test_every_rule_has_a_golden_case() -> None:
    from warpfix.rules import all_rules

    names = {p.name.split("-")[0] for p in GOLDEN.iterdir() if p.is_dir()}
    missing = [r.id for r in all_rules() if r.id not in names]
    assert not missing, f"rules without golden/<ID>-*: {missing}"


def test_golden_buggy_variants_have_findings_of_their_rule() -> None:
    for case_dir, case, _ in (p.values for p in CASES):
        buggy = case["variants"].get("buggy")
        if buggy is None:
            continue
        if case["rule"] in case.get("verify", {}).get("buggy", []):  # a runtime rule: `warpfix verify` finds it
            continue
        assert any(f.endswith(":" + case["rule"]) for f in buggy), f"{case_dir.name}: buggy lacks {case['rule']}"


VERIFY_CASES = [
    pytest.param(case_dir, case, variant, id=f"{case_dir.name}/{variant}")
    for case_dir, case, variant in (p.values for p in CASES)
    if variant in case.get("verify", {})
]


@pytest.mark.slow
@pytest.mark.parametrize(("case_dir", "case", "variant"), VERIFY_CASES)
def test_golden_verify_findings(case_dir: Path, case: dict, variant: str) -> None:
    """Runtime rules (WF804, WF9xx): the rules `warpfix verify` reports on the variant, exactly."""
    from warpfix.verify import run_verify

    report = run_verify(case["entry"], cwd=str(case_dir / variant), timeout=300)
    assert report.error is None, report.error
    assert {f.rule for f in report.findings} == set(case["verify"][variant])


@pytest.mark.slow
@pytest.mark.parametrize(("case_dir", "case", "variant"), CASES)
def test_golden_program_runs(case_dir: Path, case: dict, variant: str) -> None:
    entry = [sys.executable if part == "python" else part for part in case["entry"]]
    proc = subprocess.run(entry, cwd=case_dir / variant, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "loss0 =" in proc.stdout


def _forward_lines(folder: Path, entry: list[str]) -> list[str]:
    """The forward-value lines (`loss0 = ` / `forward: `, see golden/README.md) a program prints."""
    cmd = [sys.executable if part == "python" else part for part in entry]
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line for line in proc.stdout.splitlines() if line.startswith(("loss0 = ", "forward: "))]


FORWARD_CASES = [
    pytest.param(case_dir, case, id=case_dir.name)
    for case_dir, case, variant in (p.values for p in CASES)
    if variant == "buggy"
]


@pytest.mark.slow
@pytest.mark.parametrize(("case_dir", "case"), FORWARD_CASES)
def test_safe_fixes_keep_every_forward_value(case_dir: Path, case: dict, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Every safe fix `apply` makes to a golden buggy program keeps each forward value it prints."""
    import shutil

    from warpfix.apply import Selection, plan_fixes, write_changes

    work = tmp_path / "buggy"
    shutil.copytree(case_dir / "buggy", work)
    before = _forward_lines(work, case["entry"])
    assert before, "the program prints no forward value"
    monkeypatch.chdir(work)
    version = parse_version(case["warp_version"]) if "warp_version" in case else None
    result = plan_fixes(["."], selection=Selection(use_cache=False, warp_version=version))
    assert result.errors == []
    if not result.changed:
        pytest.skip("no safe fix applies to this program")
    assert write_changes(result) == []
    assert _forward_lines(work, case["entry"]) == before, [e.finding.rule for e in result.edits if e.kept]
