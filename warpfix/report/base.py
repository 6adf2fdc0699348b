"""What every output format shares: the input types, fix markers and rule-doc links."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import metadata
from typing import Protocol

from warpfix.finding import Finding, FixSafety


class InputErrorLike(Protocol):
    """A file that could not be checked (``warpfix.engine.InputError``)."""

    path: str
    message: str


class CheckResultLike(Protocol):
    """What ``warpfix.engine.check_paths`` / ``check_sources`` return."""

    findings: list[Finding]
    errors: list[InputErrorLike]
    files_checked: int


# ruff's convention: ``[*]`` marks a fix ``warpfix apply`` makes; ``[-]`` marks a fix that needs
# ``--unsafe-fixes``; a finding without a fix has no marker.
FIX_MARKERS = {FixSafety.SAFE: "[*]", FixSafety.UNSAFE: "[-]"}


def fix_marker(finding: Finding) -> str:
    return FIX_MARKERS.get(finding.fix.safety, "")


def count_fixable(findings: Sequence[Finding]) -> tuple[int, int]:
    """(safe, unsafe) fix counts."""
    safe = sum(f.fix.safety is FixSafety.SAFE for f in findings)
    unsafe = sum(f.fix.safety is FixSafety.UNSAFE for f in findings)
    return safe, unsafe


@cache
def _docs_base() -> str | None:
    try:
        urls = metadata.metadata("warpfix").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "documentation" and url.strip():
            return url.strip().rstrip("/")
    return None


def rule_doc_url(rule_id: str) -> str | None:
    """``<Documentation URL>/rules/<ID>`` from the package's ``[project.urls]``, if it has one."""
    base = _docs_base()
    return f"{base}/rules/{rule_id}" if base else None


def sorted_findings(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=Finding.sort_key)
