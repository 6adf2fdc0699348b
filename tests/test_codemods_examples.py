"""Every rule example with an ``expected_fix`` is a codemod test: check, fix, compare exactly.

The rewrite must equal the expected text, still parse, and a second check + fix of the
rewritten code must change nothing more (``apply`` twice is a no-op). The ``# expect: WFnnn``
marks are test annotations, not code: codemods keep comments, and an example's author may
drop the mark from the line the fix repaired, so marks are ignored in the comparison.
"""

from __future__ import annotations

import re

import pytest

from warpfix.engine import check_sources, parse_version
from warpfix.fixes import compute_edits
from warpfix.rules import Example, all_rules


def _as_sources(code: str | dict[str, str]) -> dict[str, str]:
    return {"main.py": code} if isinstance(code, str) else dict(code)


_MARK = re.compile(r"[ \t]*#\s*expect:\s*WF\d{3}(?:\s*,\s*WF\d{3})*[ \t]*$", re.MULTILINE)


def _unmarked(sources: dict[str, str]) -> dict[str, str]:
    return {path: _MARK.sub("", text) for path, text in sources.items()}


def _cases():
    for rule in all_rules():
        for i, ex in enumerate(rule.INVALID):
            if ex.expected_fix is not None:
                yield pytest.param(rule, ex, id=f"{rule.id}-invalid-{i}")


def _fix(rule_id: str, sources: dict[str, str], version: tuple[int, ...] | None) -> tuple[dict[str, str], list]:
    findings = check_sources(sources, select=[rule_id], warp_version=version).findings
    result = compute_edits(sources, findings, unsafe=True)
    return {**sources, **result.new_sources}, result.skipped


@pytest.mark.parametrize(("rule", "example"), list(_cases()))
def test_codemod_output_matches_expected_fix(rule, example: Example) -> None:
    version = parse_version(example.warp_version) if example.warp_version else None
    sources = _as_sources(example.code)
    fixed, skipped = _fix(rule.id, sources, version)
    expected = {**sources, **_as_sources(example.expected_fix)}
    assert _unmarked(fixed) == _unmarked(expected), skipped
    for path, text in fixed.items():
        compile(text, path, "exec")
    again, _ = _fix(rule.id, fixed, version)
    assert again == fixed
