"""``warpfix check --add-noqa``: a ``# warpfix: ignore[ID]`` comment on every line with a finding.

An existing ``# warpfix: ignore[...]`` comment on the line gets the new IDs; a line that cannot
take a comment (it ends inside a string, or with a backslash continuation) is left alone and
counted as a problem. Files are written as ``warpfix apply`` writes them (notebooks: only the
cells that changed).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping, Sequence

from warpfix.finding import Finding
from warpfix.fsutil import write_texts
from warpfix.suppress import UNUSED_ID

_IGNORE_LIST = re.compile(r"(#\s*warpfix:\s*ignore\[)([^\]]*)(\])", re.IGNORECASE)
_BARE = re.compile(r"#\s*warpfix:\s*ignore(?![\w\[-])", re.IGNORECASE)


def _blocked_lines(text: str) -> tuple[set[int], dict[int, tokenize.TokenInfo]]:
    """Lines ending inside a multi-line string, and the comment token of each line (1-based)."""
    blocked: set[int] = set()
    comments: dict[int, tokenize.TokenInfo] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                blocked.update(range(tok.start[0], tok.end[0]))
            elif tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok
    except (tokenize.TokenError, SyntaxError):
        pass
    return blocked, comments


def add_comments(text: str, rules_by_line: Mapping[int, Sequence[str]]) -> tuple[str, int, list[int]]:
    """``text`` with the IDs added on their lines: (new text, comments added or extended, lines refused)."""
    lines = text.splitlines(keepends=True)
    blocked, comments = _blocked_lines(text)
    added, refused = 0, []
    for line, rules in sorted(rules_by_line.items()):
        if not 1 <= line <= len(lines):
            continue
        body = lines[line - 1]
        end = body[len(body.rstrip("\r\n")):]
        code = body[: len(body) - len(end)]
        comment = comments.get(line)
        if comment is not None and _BARE.search(comment.string):
            continue  # already suppresses everything
        if comment is not None and (m := _IGNORE_LIST.search(comment.string)):
            ids = [i.strip() for i in m.group(2).split(",") if i.strip()]
            new = [r for r in rules if not any(r.startswith(i.upper()) for i in ids)]
            if not new:
                continue
            col = comment.start[1]
            code = code[: col + m.start(2)] + ", ".join([*ids, *new]) + code[col + m.end(2):]
        elif line in blocked or code.rstrip().endswith("\\"):
            refused.append(line)
            continue
        else:
            code = code.rstrip() + f"  # warpfix: ignore[{', '.join(rules)}]"
        lines[line - 1] = code + end
        added += 1
    return "".join(lines), added, refused


def add_noqa(findings: Sequence[Finding], sources: Mapping[str, str]) -> tuple[int, list[str]]:
    """Add the comments in the files of ``findings``: (comments added, one-line problems)."""
    by_file: dict[str, dict[int, list[str]]] = {}
    for f in findings:
        if f.rule == UNUSED_ID:  # a stale suppression is removed, not suppressed
            continue
        rules = by_file.setdefault(f.path, {}).setdefault(f.line, [])
        if f.rule not in rules:
            rules.append(f.rule)
    originals, changed, problems = {}, {}, []
    total = 0
    for path, rules in sorted(by_file.items()):
        if path not in sources:
            continue
        new, added, refused = add_comments(sources[path], rules)
        problems += [f"{path}:{n}: cannot add a comment on this line (a string or `\\` continues it)"
                     for n in refused]
        if new != sources[path]:
            originals[path], changed[path] = sources[path], new
            total += added
    problems += write_texts(originals, changed)
    return total, problems
