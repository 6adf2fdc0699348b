"""Every rule's embedded examples are test cases (Fixit style).

VALID: no finding of the rule. INVALID: the lines of the rule's findings are exactly the lines
marked ``# expect: WFnnn``.
"""

from __future__ import annotations

import re

import pytest

from warpfix.engine import check_sources, parse_version
from warpfix.rules import Example, all_rules

_EXPECT = re.compile(r"#\s*expect:\s*(?P<ids>WF\d{3}(?:\s*,\s*WF\d{3})*)")


def _sources(example: Example) -> dict[str, str]:
    code = example.code
    return {"main.py": code} if isinstance(code, str) else dict(code)


def expected_marks(sources: dict[str, str], rule_id: str) -> set[tuple[str, int]]:
    out = set()
    for path, text in sources.items():
        for n, line in enumerate(text.splitlines(), 1):
            m = _EXPECT.search(line)
            if m and rule_id in [i.strip() for i in m.group("ids").split(",")]:
                out.add((path, n))
    return out


def _cases(kind: str):
    for rule in all_rules():
        for i, ex in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, ex, id=f"{rule.id}-{kind.lower()}-{i}")


def _check(rule, ex: Example):
    version = parse_version(ex.warp_version) if ex.warp_version else None
    result = check_sources(_sources(ex), select=[rule.id], warp_version=version)
    assert not result.errors, result.errors
    return result


@pytest.mark.parametrize(("rule", "example"), list(_cases("VALID")))
def test_valid_example_has_no_finding(rule, example: Example) -> None:
    result = _check(rule, example)
    found = [f"{f.path}:{f.line} {f.message}" for f in result.findings if f.rule == rule.id]
    assert found == []


@pytest.mark.parametrize(("rule", "example"), list(_cases("INVALID")))
def test_invalid_example_is_found_at_marked_lines(rule, example: Example) -> None:
    sources = _sources(example)
    expected = expected_marks(sources, rule.id)
    assert expected, f"invalid example of {rule.id} marks no line with '# expect: {rule.id}'"
    result = _check(rule, example)
    found = {(f.path, f.line) for f in result.findings if f.rule == rule.id}
    assert found == expected


def test_every_rule_has_examples_and_doc() -> None:
    for rule in all_rules():
        assert rule.VALID, f"{rule.id} has no valid example"
        assert rule.INVALID, f"{rule.id} has no invalid example"
        for section in ("what", "why", "example", "use_instead", "fix", "versions"):
            assert getattr(rule.doc, section).strip(), f"{rule.id} doc lacks {section}"
