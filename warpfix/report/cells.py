"""Notebook findings in cell coordinates: ``nb.ipynb:cell 3:2:5`` (ruff's form).

The engine analyses a notebook as one Python text (:mod:`warpfix.notebook`); its findings carry
lines of that text. Reports show them as the cell and the line inside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from warpfix.finding import Finding, Span
from warpfix.notebook import MARKER, cell_position, is_notebook


def _span(span: Span, sources: Mapping[str, str]) -> tuple[Span, int | None]:
    text = sources.get(span.path) if is_notebook(span.path) else None
    start = cell_position(text, span.line) if text is not None else None
    if start is None:
        return span, None
    end = cell_position(text, span.end_line) or start
    end_line = end[1] if end[0] == start[0] else start[1]
    return dataclasses.replace(span, line=start[1], end_line=end_line), start[0]


def localize(finding: Finding, sources: Mapping[str, str]) -> tuple[Finding, int | None]:
    """The finding with its spans in its cell's lines, and the cell number (None: not a notebook)."""
    span, cell = _span(finding.span, sources)
    related = tuple((_span(s, sources)[0], m) for s, m in finding.related)
    if cell is None and related == finding.related:
        return finding, None
    return dataclasses.replace(finding, span=span, related=related), cell


def cell_label(path: str, cell: int) -> str:
    return f"{path}:cell {cell}"


def cell_sources(path: str, text: str) -> dict[str, str]:
    """The code of each cell of a notebook's Python text, keyed by :func:`cell_label`."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith(MARKER):
            current = out.setdefault(cell_label(path, int(line[len(MARKER):])), [])
        elif current is not None:
            current.append(line)
    return {k: "".join(v) for k, v in out.items()}


def _labelled(span: Span, sources: Mapping[str, str]) -> Span:
    local, cell = _span(span, sources)
    return local if cell is None else dataclasses.replace(local, path=cell_label(span.path, cell))


def for_display(findings: list[Finding], sources: Mapping[str, str]) -> tuple[list[Finding], dict[str, str]]:
    """Findings whose notebook spans are relabelled ``path:cell N`` with in-cell lines, and the
    sources extended with each cell's code under that label (for the text report)."""
    notebooks = [p for p in sources if is_notebook(p)]
    if not notebooks:
        return findings, dict(sources)
    shown = [
        dataclasses.replace(f, span=_labelled(f.span, sources),
                            related=tuple((_labelled(s, sources), m) for s, m in f.related))
        for f in findings
    ]
    extra: dict[str, str] = {}
    for path in notebooks:
        extra.update(cell_sources(path, sources[path]))
    return shown, {**sources, **extra}
