"""``--format json``: one document with every finding and every input error.

Shape (stable, ``version`` bumps on incompatible changes)::

    {"version": 1, "warp_version": "1.19.0", "files_checked": 3,
     "findings": [Finding.to_json(), ...],
     "errors": [{"path": "bad.py", "message": "invalid syntax (line 3)"}]}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from warpfix.finding import Finding
from warpfix.report.base import InputErrorLike, sorted_findings

JSON_FORMAT_VERSION = 1


def json_document(
    findings: Sequence[Finding],
    *,
    warp_version: str,
    errors: Sequence[InputErrorLike] = (),
    files_checked: int | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": JSON_FORMAT_VERSION,
        "warp_version": warp_version,
        "findings": [f.to_json() for f in sorted_findings(findings)],
        "errors": [{"path": e.path, "message": e.message} for e in sorted(errors, key=lambda e: e.path)],
    }
    if files_checked is not None:
        doc["files_checked"] = files_checked
    return doc


def render_json(
    findings: Sequence[Finding],
    *,
    warp_version: str,
    errors: Sequence[InputErrorLike] = (),
    files_checked: int | None = None,
) -> str:
    doc = json_document(findings, warp_version=warp_version, errors=errors, files_checked=files_checked)
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"
