"""Human-readable output (the default ``--format text``), printed through a rich Console.

One block per finding::

    sim.py:40:5: WF101 [*] `wp.copy(state, proj)` writes back into `state` after ...
       |
    40 |     wp.copy(state, proj)
       |     ^^^^^^^^^^^^^^^^^^^^ copy-writeback
       |
       = note: sim.py:31:5: `state` is read here
       = help: Replace the copy with a rebinding

``[*]`` marks a fix that ``warpfix apply`` makes, ``[-]`` a fix that needs
``warpfix apply --unsafe-fixes``; a finding without a fix has no marker (its ``help`` line says why
when ``apply`` refuses the fix its rule has: ``...; not automatic: no tape records this code``). A summary closes
the report. A notebook finding is placed as ``nb.ipynb:cell 3:2:5`` (cell 3, its line 2), and its
snippet shows the cell's lines.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from warpfix.finding import Finding, Severity
from warpfix.report.base import InputErrorLike, count_fixable, fix_marker, sorted_findings
from warpfix.report.cells import for_display

_SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.INFO: "bold cyan"}
_TAB_SIZE = 4


class _SourceCache:
    """Source lines by path: from the given mapping, else read from disk (None if unreadable)."""

    def __init__(self, sources: Mapping[str, str] | None) -> None:
        self._given = sources or {}
        self._lines: dict[str, list[str] | None] = {}

    def line(self, path: str, lineno: int) -> str | None:
        if path not in self._lines:
            text = self._given.get(path)
            if text is None:
                try:
                    text = Path(path).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    text = None
            self._lines[path] = text.splitlines() if text is not None else None
        lines = self._lines[path]
        if lines is None or not 1 <= lineno <= len(lines):
            return None
        return lines[lineno - 1]


def _snippet(finding: Finding, source_line: str) -> list[Text]:
    """The source line with the finding's span underlined, in a gutter."""
    span = finding.span
    start = max(span.column - 1, 0)
    end = span.end_column - 1 if span.end_line == span.line else len(source_line.rstrip())
    end = max(min(end, len(source_line)), start + 1)
    # Tabs are expanded before measuring, wide characters measured in terminal cells.
    before = source_line[:start].expandtabs(_TAB_SIZE)
    marked = source_line[start:end].expandtabs(_TAB_SIZE)
    shown = source_line.expandtabs(_TAB_SIZE).rstrip()
    width = len(str(span.line))
    gutter = " " * width + " |"
    severity_style = _SEVERITY_STYLE[finding.severity]
    underline = Text(gutter + " ", style="blue")
    underline.append(" " * cell_len(before))
    underline.append("^" * max(cell_len(marked), 1), style=severity_style)
    underline.append(f" {finding.name}", style=severity_style)
    code = Text(f"{span.line:>{width}} | ", style="blue")
    code.append(shown)
    return [Text(gutter, style="blue"), code, underline, Text(gutter, style="blue")]


def _header(finding: Finding) -> Text:
    s = finding.span
    text = Text()
    text.append(s.path, style="bold")
    text.append(f":{s.line}:{s.column}: ")
    text.append(finding.rule, style=_SEVERITY_STYLE[finding.severity])
    marker = fix_marker(finding)
    if marker:
        text.append(f" {marker}", style="cyan")
    text.append(f" {finding.message}")
    return text


def _skipped(skipped: Mapping[str, int]) -> Text | None:
    counts = {k: v for k, v in skipped.items() if v}
    if not counts:
        return None
    venvs = counts.pop("virtualenv", 0)
    parts = []
    if counts:
        total = sum(counts.values())
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
        parts.append(f"{total} file{'s' * (total != 1)} ({why})")
    if venvs:
        parts.append(f"{venvs} virtualenv{'s' * (venvs != 1)}")
    return Text(f"Skipped {' and '.join(parts)}.")


def _summary(
    findings: Sequence[Finding], errors: Sequence[InputErrorLike], files_checked: int | None
) -> list[Text]:
    out: list[Text] = []
    if not findings:
        checked = (
            f" ({files_checked} file{'s' * (files_checked != 1)} checked)"
            if files_checked is not None
            else ""
        )
        if not errors:
            out.append(Text(f"All checks passed!{checked}", style="bold green"))
        else:
            out.append(Text(f"No findings{checked}."))
    else:
        files = len({f.path for f in findings})
        noun = "finding" if len(findings) == 1 else "findings"
        out.append(Text(f"Found {len(findings)} {noun} in {files} file{'s' * (files != 1)}.", style="bold"))
        safe, unsafe = count_fixable(findings)
        if safe:
            out.append(Text(f"[*] {safe} fixable with `warpfix apply`."))
        if unsafe:
            more = " more" if safe else ""
            out.append(Text(f"[-] {unsafe}{more} fixable with `warpfix apply --unsafe-fixes`."))
    if errors:
        noun = "file" if len(errors) == 1 else "files"
        out.append(Text(f"{len(errors)} {noun} could not be checked.", style="bold red"))
    return out


def render_text(
    findings: Sequence[Finding],
    *,
    errors: Sequence[InputErrorLike] = (),
    sources: Mapping[str, str] | None = None,
    files_checked: int | None = None,
    color: bool = False,
    skipped: Mapping[str, int] | None = None,
    quiet: bool = False,
    show_errors: bool = True,
    concise: bool = False,
) -> str:
    """The report as a string; with ``color`` it carries ANSI styles for a terminal.

    ``sources`` maps finding paths to file contents; paths missing from it are read from
    disk, and a finding whose line cannot be read is shown without a snippet. ``skipped``
    (reason -> count) adds a line to the summary; ``quiet`` leaves the summary out;
    ``show_errors=False`` leaves the input errors' lines to the caller (who prints them on
    stderr), the summary still counts them. ``concise`` prints each finding's first line only.
    """
    buf = io.StringIO()
    console = Console(
        file=buf,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=True,
        width=200,
    )
    shown, sources = for_display(sorted_findings(findings), sources or {})
    cache = _SourceCache(sources)
    for finding in shown:
        console.print(_header(finding))
        if concise:
            continue
        line = cache.line(finding.path, finding.line)
        if line is not None:
            for row in _snippet(finding, line):
                console.print(row)
        pad = " " * (len(str(finding.line)) + 1) if line is not None else "  "
        for span, message in finding.related:
            console.print(Text(f"{pad}= note: {span.path}:{span.line}:{span.column}: {message}"))
        if fix_marker(finding) or isinstance(finding.data.get("no_edit"), str):  # a fix, or why apply makes none
            console.print(Text(f"{pad}= help: {finding.fix.description}"))
        console.print()
    for error in sorted(errors, key=lambda e: e.path) if show_errors else ():
        line = Text()
        line.append("error", style="bold red")
        line.append(f": {error.path}: {error.message}")
        console.print(line)
    if quiet:
        return buf.getvalue()
    for row in _summary(findings, errors, files_checked):
        console.print(row)
    note = _skipped(skipped or {})
    if note is not None:
        console.print(note)
    return buf.getvalue()
