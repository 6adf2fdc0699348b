"""``--output-format gitlab``: a GitLab Code Quality report (``artifacts: reports: codequality``).

A JSON list with one issue per finding::

    [{"description": "WF101 `wp.copy(state, proj)` writes back ...", "check_name": "WF101",
      "fingerprint": "4f0c...", "severity": "major", "location": {"path": "sim.py", "lines": {"begin": 40}}}]

Severity: error -> ``major``, warning -> ``minor``, info -> ``info``. The fingerprint is a hash of the rule, the
path, the message and the finding's rank among identical ones, so that GitLab follows a finding across commits
that move it to another line and tells two identical findings of one file apart. A notebook finding gives its
line inside the cell and starts its description with ``cell N:``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence

from warpfix.finding import Finding, Severity
from warpfix.report.base import sorted_findings
from warpfix.report.cells import localize

_SEVERITY = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}


def render_gitlab(findings: Sequence[Finding], *, sources: Mapping[str, str] | None = None) -> str:
    issues = []
    seen: Counter[tuple[str, str, str]] = Counter()
    for finding in sorted_findings(findings):
        local, cell = localize(finding, sources or {})
        key = (local.rule, local.span.path, local.message)
        rank = seen[key]
        seen[key] += 1
        fingerprint = hashlib.sha256("\0".join([*key, str(rank)]).encode()).hexdigest()
        text = local.message if cell is None else f"cell {cell}: {local.message}"
        issues.append({
            "description": f"{local.rule} {text}",
            "check_name": local.rule,
            "fingerprint": fingerprint,
            "severity": _SEVERITY[local.severity],
            "location": {"path": local.span.path, "lines": {"begin": local.span.line, "end": local.span.end_line}},
        })
    return json.dumps(issues, indent=2) + "\n"
