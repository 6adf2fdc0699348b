"""Unified diffs and line hunks between two versions of a set of files (difflib).

``unified_diff`` is what ``warpfix apply --diff`` prints; ``line_hunks`` is the minimal
list of line-range replacements that turns one text into the other, which the SARIF
``fixes`` and the language server's ``TextEdit`` lists are built from.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Hunk:
    """Replace the old lines ``[start, end)`` (0-based) with ``text`` (whole lines, newlines kept)."""

    start: int
    end: int
    text: str


def line_hunks(old: str, new: str) -> list[Hunk]:
    """The changed line ranges between ``old`` and ``new``, in order, not overlapping."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return [
        Hunk(i1, i2, "".join(b[j1:j2])) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    ]


def unified_diff(path: str, old: str, new: str, *, context: int = 3) -> str:
    """A ``git diff``-style unified diff of one file ("" when unchanged)."""
    if old == new:
        return ""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
        n=context,
    )
    out: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:  # the last line of a file without a final newline, as git shows it
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def render_diff(old_sources: Mapping[str, str], new_sources: Mapping[str, str]) -> str:
    """Unified diffs of every file that changed, sorted by path."""
    parts = []
    for path in sorted(new_sources):
        old = old_sources.get(path, "")
        parts.append(unified_diff(path, old, new_sources[path]))
    return "".join(parts)
