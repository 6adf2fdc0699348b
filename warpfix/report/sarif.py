"""``--format sarif``: a SARIF 2.1.0 log, as GitHub code scanning reads it.

The run's ``tool.driver.rules`` lists every registered rule with its documentation
(``Rule.render_doc()`` as ``help.markdown``). Each finding is a result with its rule,
level, message and a 1-based region (columns in Unicode code points) in an artifact whose
URI is relative to ``%SRCROOT%``; findings with a fix carry it as a SARIF ``fix`` with the
replacements the codemod makes when ``sources`` are given. Files that could not be read or
parsed are tool execution notifications.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from warpfix import __version__
from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.report.base import InputErrorLike, rule_doc_url, sorted_findings
from warpfix.report.cells import localize
from warpfix.report.diff import line_hunks
from warpfix.report.fixedits import fix_changes
from warpfix.rules import Rule, all_rules

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


class _Locator:
    """Artifact locations relative to the source root (absolute file URIs outside it)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def root_uri(self) -> str:
        return self.root.as_uri() + "/"

    def artifact(self, path: str) -> dict[str, str]:
        p = Path(path)
        absolute = (p if p.is_absolute() else Path.cwd() / p).resolve()
        try:
            rel = absolute.relative_to(self.root)
        except ValueError:
            return {"uri": absolute.as_uri()}
        return {"uri": quote(rel.as_posix()), "uriBaseId": SRCROOT}

    def physical(self, span: Span) -> dict[str, Any]:
        return {
            "artifactLocation": self.artifact(span.path),
            "region": {
                "startLine": span.line,
                "startColumn": span.column,
                "endLine": span.end_line,
                "endColumn": max(span.end_column, 1),
            },
        }


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    head, dot, _ = text.partition(". ")
    return head + "." if dot else text


def _rule_descriptor(rule: type[Rule]) -> dict[str, Any]:
    doc = rule.render_doc()
    descriptor: dict[str, Any] = {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": _first_sentence(rule.doc.what)},
        "fullDescription": {"text": " ".join(rule.doc.what.split())},
        "help": {"text": doc, "markdown": doc},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"tags": ["warp", "autodiff", "correctness"], "fixSafety": rule.fix_safety.value},
    }
    url = rule_doc_url(rule.id)
    if url:
        descriptor["helpUri"] = url
    return descriptor


def _replacements(old: str, new: str) -> list[dict[str, Any]]:
    """difflib line hunks as character-offset replacements."""
    starts = [0]
    for line in old.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    out = []
    for hunk in line_hunks(old, new):
        offset = starts[hunk.start]
        replacement: dict[str, Any] = {
            "deletedRegion": {"charOffset": offset, "charLength": starts[hunk.end] - offset}
        }
        if hunk.text:
            replacement["insertedContent"] = {"text": hunk.text}
        out.append(replacement)
    return out


def _fix(finding: Finding, sources: Mapping[str, str], locator: _Locator) -> dict[str, Any] | None:
    try:
        changes = fix_changes(sources, [finding], unsafe=True)
    except Exception:  # a codemod bug costs the log this fix, not the report
        return None
    if not changes:
        return None
    safety = "" if finding.fix.safety is FixSafety.SAFE else " (unsafe fix: `warpfix apply --unsafe-fixes`)"
    return {
        "description": {"text": finding.fix.description + safety},
        "artifactChanges": [
            {"artifactLocation": locator.artifact(path), "replacements": _replacements(old, new)}
            for path, (old, new) in sorted(changes.items())
        ],
    }


def _read_sources(findings: Sequence[Finding]) -> dict[str, str]:
    sources = {}
    for path in {f.path for f in findings}:
        try:
            sources[path] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return sources


def sarif_log(
    findings: Sequence[Finding],
    *,
    warp_version: str,
    errors: Sequence[InputErrorLike] = (),
    sources: Mapping[str, str] | None = None,
    root: str | Path | None = None,
) -> dict[str, Any]:
    """The SARIF log as a dict.

    ``sources`` maps paths to contents for computing fixes; give every checked file so that
    fixes spanning several files are complete (findings' files are read from disk otherwise).
    ``root`` (default: the current directory) is ``%SRCROOT%``.
    """
    locator = _Locator(Path(root) if root is not None else Path.cwd())
    rules = list(all_rules())
    index = {r.id: i for i, r in enumerate(rules)}
    descriptors = [_rule_descriptor(r) for r in rules]
    for finding in findings:  # a rule that is not registered (a runtime verdict) still gets a descriptor
        if finding.rule not in index:
            index[finding.rule] = len(descriptors)
            descriptors.append({"id": finding.rule, "name": finding.name})
    if sources is None:
        sources = _read_sources([f for f in findings if f.fix.safety is not FixSafety.NONE])

    results = []
    for finding in sorted_findings(findings):
        shown, cell = localize(finding, sources or {})  # notebooks: lines inside the cell
        result: dict[str, Any] = {
            "ruleId": finding.rule,
            "ruleIndex": index[finding.rule],
            "level": _LEVEL[finding.severity],
            "message": {"text": finding.message},
            "locations": [{"physicalLocation": locator.physical(shown.span)}],
        }
        if shown.related:
            result["relatedLocations"] = [
                {"id": i, "physicalLocation": locator.physical(span), "message": {"text": message}}
                for i, (span, message) in enumerate(shown.related, start=1)
            ]
        if finding.fix.safety is not FixSafety.NONE and sources and shown is finding:
            fix = _fix(finding, sources, locator)
            if fix:
                result["fixes"] = [fix]
        result["properties"] = {"fixSafety": finding.fix.safety.value, "name": finding.name}
        if cell is not None:
            result["properties"]["cell"] = cell
        results.append(result)

    notifications = [
        {
            "level": "error",
            "message": {"text": error.message},
            "locations": [{"physicalLocation": {"artifactLocation": locator.artifact(error.path)}}],
        }
        for error in sorted(errors, key=lambda e: e.path)
    ]
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "warpfix",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": descriptors,
                    }
                },
                "invocations": [invocation],
                "originalUriBaseIds": {SRCROOT: {"uri": locator.root_uri()}},
                "columnKind": "unicodeCodePoints",
                "results": results,
                "properties": {"warpVersion": warp_version},
            }
        ],
    }


def render_sarif(
    findings: Sequence[Finding],
    *,
    warp_version: str,
    errors: Sequence[InputErrorLike] = (),
    sources: Mapping[str, str] | None = None,
    root: str | Path | None = None,
) -> str:
    log = sarif_log(findings, warp_version=warp_version, errors=errors, sources=sources, root=root)
    return json.dumps(log, indent=2) + "\n"
