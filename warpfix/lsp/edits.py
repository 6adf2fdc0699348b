"""Text edits of the language server: a codemod's rewrite as whole-line edits, and the
``# warpfix: ignore[...]`` comment of "Disable WFnnn for this line"."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import PositionCodec

from warpfix.report.diff import line_hunks

_IGNORE_LIST = re.compile(r"(#\s*warpfix:\s*ignore)\[([^\]]*)\]", re.IGNORECASE)
_BARE_IGNORE = re.compile(r"#\s*warpfix:\s*ignore(?!\[)", re.IGNORECASE)


def position(lines: Sequence[str], line: int, char: int, codec: PositionCodec) -> types.Position:
    """A 0-based (line, code point) position in the client's units."""
    if line >= len(lines):
        return types.Position(line=line, character=0)
    return codec.position_to_client_units(lines, types.Position(line=line, character=char))


def text_edits(old: str, new: str, codec: PositionCodec) -> list[types.TextEdit]:
    """Whole-line edits that turn ``old`` into ``new``."""
    lines = old.splitlines(keepends=True)
    edits = []
    for hunk in line_hunks(old, new):
        start = types.Position(line=hunk.start, character=0)
        if hunk.end == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
            # no line after the last one: end at the end of the text
            end = position(lines, len(lines) - 1, len(lines[-1]), codec)
        else:
            end = types.Position(line=hunk.end, character=0)
        edits.append(types.TextEdit(range=types.Range(start=start, end=end), new_text=hunk.text))
    return edits


def ignore_comment_edit(text: str, line: int, rule: str) -> types.TextEdit | None:
    """The edit that adds ``rule`` to the ``# warpfix: ignore[...]`` comment of 0-based ``line``.

    None when the line cannot take a comment (it ends inside a string or with a backslash
    continuation) or already suppresses the rule.
    """
    lines = text.splitlines()
    if line >= len(lines):
        return None
    body = lines[line]
    comment: tokenize.TokenInfo | None = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.start[0] > line + 1:
                break
            if tok.type == tokenize.STRING and tok.start[0] <= line + 1 < tok.end[0]:
                return None
            if tok.type == tokenize.COMMENT and tok.start[0] == line + 1:
                comment = tok
    except (tokenize.TokenError, SyntaxError):
        pass  # a broken file: the line's own text still decides
    if comment is None and body.rstrip().endswith("\\"):
        return None
    if comment is not None:
        if _BARE_IGNORE.search(comment.string):
            return None
        match = _IGNORE_LIST.search(comment.string)
        if match:
            ids = [i.strip() for i in match.group(2).split(",") if i.strip()]
            if any(rule.startswith(i.upper()) for i in ids):  # IDs or prefixes, as suppression reads them
                return None
            start = comment.start[1] + match.start(2)
            end = comment.start[1] + match.end(2)
            return _edit(line, start, end, ", ".join([*ids, rule]))
    end = len(body.rstrip())
    return _edit(line, end, len(body), f"  # warpfix: ignore[{rule}]")


def _edit(line: int, start: int, end: int, text: str) -> types.TextEdit:
    # Columns here are code points; the caller converts them for the client.
    span = types.Range(types.Position(line=line, character=start), types.Position(line=line, character=end))
    return types.TextEdit(range=span, new_text=text)
