"""Output formats: text (rich; ``full``) or one line per finding (``concise``), json and json-lines, sarif,
github annotations, gitlab code quality; unified diffs in ``diff``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from warpfix.report.base import CheckResultLike, InputErrorLike, fix_marker, rule_doc_url
from warpfix.report.diff import render_diff, unified_diff

__all__ = [
    "FORMATS",
    "CheckResultLike",
    "InputErrorLike",
    "fix_marker",
    "render",
    "render_diff",
    "rule_doc_url",
    "unified_diff",
]

FORMATS = ("text", "full", "concise", "json", "json-lines", "sarif", "github", "gitlab")


def render(
    fmt: str,
    result: CheckResultLike,
    *,
    warp_version: str,
    sources: Mapping[str, str] | None = None,
    color: bool = False,
    root: str | Path | None = None,
) -> str:
    """Render a check result in one of :data:`FORMATS` and return the text to print.

    - ``text`` (or ``full``, ruff's name): one block per finding (``path:line:col: WFnnn [*] message``, the
      source line with the span underlined, notes and the fix), then a summary; ``color`` adds ANSI styles.
    - ``concise``: the first line of each block only, then the summary.
    - ``json``: ``{"version": 1, "warp_version": ..., "findings": [...], "errors": [...],
      "files_checked": N}``; ``json-lines``: one finding object per line (no document around them).
    - ``sarif``: a SARIF 2.1.0 log with every rule's doc, one result per finding and the
      fix's replacements; URIs relative to ``root`` (default: the current directory).
    - ``github``: one ``::error``/``::warning``/``::notice`` workflow command per finding.
    - ``gitlab``: a GitLab Code Quality report (a JSON list of issues).

    ``sources`` maps paths to file contents (the checked files): the text format shows
    lines from it and SARIF computes fixes from it; files missing from it are read from disk.
    ``warp_version`` is the installed Warp version as a string ("1.19.0"). Notebook findings are
    shown in cell coordinates (``nb.ipynb:cell 3:2:5``; JSON adds ``"cell": 3``).

    Each format's module is imported when it is used (rich only for text).
    """
    findings = list(result.findings)
    errors = list(result.errors)
    if fmt in ("text", "full", "concise"):
        from warpfix.report.text import render_text

        return render_text(
            findings, errors=errors, sources=sources, files_checked=result.files_checked, color=color,
            concise=fmt == "concise",
        )
    if fmt == "json":
        from warpfix.report.json_out import render_json

        return render_json(
            findings, warp_version=warp_version, errors=errors, files_checked=result.files_checked,
            sources=sources,
        )
    if fmt == "json-lines":
        from warpfix.report.json_out import render_json_lines

        return render_json_lines(findings, sources=sources)
    if fmt == "gitlab":
        from warpfix.report.gitlab import render_gitlab

        return render_gitlab(findings, sources=sources)
    if fmt == "sarif":
        from warpfix.report.sarif import render_sarif

        return render_sarif(findings, warp_version=warp_version, errors=errors, sources=sources, root=root)
    if fmt == "github":
        from warpfix.report.github import render_github

        return render_github(findings, errors=errors, sources=sources)
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")
