"""Suppression comments, and WF000 for those that suppress nothing.

- ``# warpfix: ignore[WF101, WF105]`` / ``# warpfix: ignore`` on the line where a finding starts;
- ``# warpfix: ignore-file[WF4]`` / ``# warpfix: ignore-file`` on a line of its own, anywhere in
  the file: the whole file.

IDs are rule IDs or prefixes. Comments are read from real comment tokens only (not strings).
A suppressed ID that names no rule, or that suppressed nothing where every rule it covers
ran, is reported as ``WF000 unused-suppression`` (ruff's RUF100) at the comment.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span

UNUSED_ID = "WF000"
UNUSED_NAME = "unused-suppression"
_COMMENT = re.compile(
    r"#\s*warpfix:\s*ignore(?P<file>-file)?(?![\w-])(?:\[(?P<ids>[A-Za-z0-9_,\s-]*)\])?", re.IGNORECASE
)


@dataclass
class Comment:
    line: int
    column: int  # 1-based, of the comment's ``#``
    end_column: int
    ids: list[str] | None  # None: every rule
    whole_file: bool
    used: set[str] = field(default_factory=set)  # the IDs that suppressed a finding ("" for a bare one)

    def covers(self, rule: str) -> str | None:
        """The ID of this comment that suppresses ``rule`` ("" for a bare comment), or None."""
        if self.ids is None:
            return ""
        return next((i for i in self.ids if rule.startswith(i)), None)


def parse_comments(text: str) -> list[Comment]:
    if "warpfix" not in text:
        return []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    out: list[Comment] = []
    code_lines = {t.start[0] for t in tokens if t.type not in _NON_CODE}
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = _COMMENT.search(tok.string)
        if not m:
            continue
        line = tok.start[0]
        whole_file = m.group("file") is not None
        if whole_file and line in code_lines:
            continue  # a file-level comment stands on its own line
        raw = m.group("ids")
        ids = [i.strip().upper() for i in raw.split(",") if i.strip()] if raw is not None else None
        out.append(Comment(line, tok.start[1] + 1, tok.end[1] + 1, ids or None, whole_file))
    return out


_NON_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENDMARKER, tokenize.ENCODING}


def filter_findings(
    findings: Iterable[Finding],
    texts: Mapping[str, str],
    *,
    known: Iterable[str],
    runnable: Iterable[str] = (),
    ran: Callable[[str], set[str]] | None = None,
) -> list[Finding]:
    """The findings no comment suppresses, plus WF000 findings when ``ran`` is given.

    ``texts`` maps paths to their text; ``known`` is every rule ID (runtime ones included);
    ``runnable`` the static rules that apply to this Warp version; ``ran(path)`` the IDs of the
    rules that ran and were reported for ``path``. An ID is only called unused when the static
    rules it covers all ran there (and there are some); a bare comment only when every rule did.
    """
    known = sorted(set(known))
    static = set(runnable) - {UNUSED_ID}
    comments: dict[str, list[Comment]] = {}
    out: list[Finding] = []
    for f in findings:
        if f.path not in comments:
            comments[f.path] = parse_comments(texts[f.path]) if f.path in texts else []
        if not _suppress(comments[f.path], f):
            out.append(f)
    if ran is None:
        return out
    for path, text in texts.items():
        if path not in comments:
            comments[path] = parse_comments(text)
        if not comments[path]:
            continue
        rules = ran(path)
        for c in comments[path]:
            for finding in _unused(path, c, known, static, rules):
                if not _suppress(comments[path], finding):
                    out.append(finding)
    return out


def _suppress(comments: list[Comment], finding: Finding) -> bool:
    hit = False
    for c in comments:
        if c.whole_file or c.line == finding.line:
            used = c.covers(finding.rule)
            if used is not None:
                c.used.add(used)
                hit = True
    return hit


def _unused(path: str, c: Comment, known: list[str], static: set[str], rules: set[str]) -> list[Finding]:
    where = "file" if c.whole_file else "line"
    span = Span(path, c.line, c.column, c.line, c.end_column)

    def finding(message: str) -> Finding:
        return Finding(UNUSED_ID, UNUSED_NAME, Severity.WARNING, span, message,
                       Fix(FixSafety.NONE, "remove the ID from the comment"))

    if c.ids is None:
        if not c.used and static <= rules:
            return [finding(f"unused suppression: no finding on this {where} to ignore")]
        return []
    out = []
    for i in c.ids:
        covered = {k for k in static if k.startswith(i)}
        if not any(k.startswith(i) for k in known):
            out.append(finding(f"unknown rule ID `{i}` in suppression (see `warpfix rules`)"))
        elif i not in c.used and covered and covered <= rules:
            out.append(finding(f"unused suppression of `{i}`: no such finding on this {where}"))
    return out
