"""``--format json``: one document with every finding and every input error.

Shape (stable, ``version`` bumps on incompatible changes)::

    {"version": 1, "warp_version": "1.19.0", "files_checked": 3,
     "findings": [Finding.to_json(), ...],
     "errors": [{"path": "bad.py", "message": "invalid syntax (line 3)"}]}

``--format json-lines`` writes the findings only, one ``Finding.to_json()`` object per line.

A finding in a notebook has ``"cell": N`` (1-based, among all cells) and lines inside that cell.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from warpfix.finding import Finding
from warpfix.report.base import InputErrorLike, sorted_findings
from warpfix.report.cells import localize

JSON_FORMAT_VERSION = 1


def json_document(
    findings: Sequence[Finding],
    *,
    warp_version: str,
    errors: Sequence[InputErrorLike] = (),
    files_checked: int | None = None,
    sources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": JSON_FORMAT_VERSION,
        "warp_version": warp_version,
        "findings": [_finding(f, sources or {}) for f in sorted_findings(findings)],
        "errors": [{"path": e.path, "message": e.message} for e in sorted(errors, key=lambda e: e.path)],
    }
    if files_checked is not None:
        doc["files_checked"] = files_checked
    return doc


def _finding(finding: Finding, sources: Mapping[str, str]) -> dict[str, Any]:
    local, cell = localize(finding, sources)
    out = local.to_json()
    if cell is not None:
        out["cell"] = cell
    return out


def render_json(
    findings: Sequence[Finding],
    *,
    warp_version: str,
    errors: Sequence[InputErrorLike] = (),
    files_checked: int | None = None,
    sources: Mapping[str, str] | None = None,
) -> str:
    doc = json_document(findings, warp_version=warp_version, errors=errors, files_checked=files_checked,
                        sources=sources)
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def render_json_lines(findings: Sequence[Finding], *, sources: Mapping[str, str] | None = None) -> str:
    return "".join(json.dumps(_finding(f, sources or {})) + "\n" for f in sorted_findings(findings))


def strict_json(value: Any) -> Any:
    """``value`` with every non-finite float (a NaN loss, an infinite FD) written as the string
    ``"nan"``, ``"inf"`` or ``"-inf"``: JSON has no such numbers, and ``json.dumps`` would print
    the bare ``NaN`` that strict parsers (``jq``, JavaScript) reject."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value
