"""``--format github``: GitHub Actions workflow commands, shown as annotations on the diff.

One line per finding::

    ::error file=sim.py,line=40,col=5,endLine=40,endColumn=25,title=WF101 copy-writeback::message

Severity maps to the command (``error``, ``warning``, ``notice``). Values are escaped as
the Actions toolkit does: ``%``, CR and LF in the message; additionally ``:`` and ``,`` in
properties. Columns are only given for single-line spans (GitHub ignores them otherwise).
A notebook finding gives the line inside its cell and starts its message with ``cell N:``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from warpfix.finding import Finding, Severity
from warpfix.report.base import InputErrorLike, fix_marker, sorted_findings
from warpfix.report.cells import localize

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _command(name: str, properties: dict[str, str | int], message: str) -> str:
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{name} {props}::{escape_data(message)}"


def _annotation(finding: Finding, sources: Mapping[str, str]) -> str:
    finding, cell = localize(finding, sources)
    s = finding.span
    props: dict[str, str | int] = {"file": s.path, "line": s.line}
    if s.end_line == s.line:
        props.update(col=s.column, endLine=s.end_line, endColumn=s.end_column)
    else:
        props["endLine"] = s.end_line
    props["title"] = f"{finding.rule} {finding.name}"
    message = finding.message if cell is None else f"cell {cell}: {finding.message}"
    marker = fix_marker(finding)
    if marker:
        message += f"\n{marker} fix: {finding.fix.description}"
    return _command(_COMMAND[finding.severity], props, message)


def render_github(
    findings: Sequence[Finding], *, errors: Sequence[InputErrorLike] = (), sources: Mapping[str, str] | None = None
) -> str:
    lines = [_annotation(f, sources or {}) for f in sorted_findings(findings)]
    lines += [
        _command("error", {"file": e.path, "title": "warpfix: file not checked"}, e.message)
        for e in sorted(errors, key=lambda e: e.path)
    ]
    return "".join(line + "\n" for line in lines)
