"""``# warpfix: ignore[WF101, WF105]`` / ``# warpfix: ignore`` on the line of a finding."""

from __future__ import annotations

import io
import re
import tokenize

_COMMENT = re.compile(r"#\s*warpfix:\s*ignore(?:\[(?P<ids>[A-Za-z0-9_,\s-]*)\])?", re.IGNORECASE)


def suppressions(text: str) -> dict[int, set[str] | None]:
    """Line -> suppressed rule IDs (None = all rules), read from real comments only (not strings)."""
    out: dict[int, set[str] | None] = {}
    if "warpfix" not in text:
        return out
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return out
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = _COMMENT.search(tok.string)
        if not m:
            continue
        line = tok.start[0]
        ids = m.group("ids")
        if ids is None or not ids.strip():
            out[line] = None
        else:
            new = {i.strip().upper() for i in ids.split(",") if i.strip()}
            prev = out.get(line, set())
            out[line] = None if prev is None and line in out else (prev or set()) | new
    return out


def is_suppressed(table: dict[int, set[str] | None], line: int, rule: str) -> bool:
    if line not in table:
        return False
    ids = table[line]
    return ids is None or rule in ids or any(rule.startswith(i) for i in ids)
