"""Output formats: text, json, github annotations, unified diffs and the ``render`` dispatch."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pytest

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.report import FORMATS, render
from warpfix.report.diff import line_hunks, render_diff, unified_diff
from warpfix.report.github import escape_data, escape_property, render_github
from warpfix.report.json_out import render_json
from warpfix.report.text import render_text

SOURCE = """import warp as wp

@wp.kernel
def k(x: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.sqrt(wp.dot(x[i], x[i]))
"""


@dataclass
class Error:
    path: str
    message: str


@dataclass
class Result:
    findings: list[Finding]
    errors: list[Error] = field(default_factory=list)
    files_checked: int = 1


def make(
    rule: str = "WF702",
    *,
    path: str = "sim.py",
    line: int = 6,
    col: int = 14,
    end_line: int | None = None,
    end_col: int = 41,
    safety: FixSafety = FixSafety.SAFE,
    severity: Severity = Severity.WARNING,
    message: str = "`wp.sqrt(wp.dot(v, v))` has an unguarded adjoint at v = 0",
    related: tuple[tuple[Span, str], ...] = (),
) -> Finding:
    return Finding(
        rule=rule,
        name="singular-point",
        severity=severity,
        span=Span(path, line, col, end_line or line, end_col),
        message=message,
        fix=Fix(safety, "Use `wp.length(v)`"),
        related=related,
    )


# -- text ---------------------------------------------------------------------------------------


def test_text_header_snippet_and_caret_under_the_span() -> None:
    out = render_text([make()], sources={"sim.py": SOURCE}, files_checked=1)
    lines = out.splitlines()
    assert lines[0] == "sim.py:6:14: WF702 [*] `wp.sqrt(wp.dot(v, v))` has an unguarded adjoint at v = 0"
    code = next(row for row in lines if row.startswith("6 | "))
    carets = next(row for row in lines if "^" in row)
    start = carets.index("^")
    width = carets.count("^")
    assert code[start : start + width] == "wp.sqrt(wp.dot(x[i], x[i]))"
    assert carets.endswith(" singular-point")
    assert "  = help: Use `wp.length(v)`" in lines
    assert "\x1b[" not in out


def test_text_markers_and_summary_counts() -> None:
    findings = [
        make(line=6),
        make("WF202", line=3, col=1, end_col=11, safety=FixSafety.UNSAFE),
        make("WF203", line=5, col=5, end_col=15, safety=FixSafety.NONE),
        make(path="other.py", line=6, safety=FixSafety.SAFE),
    ]
    out = render_text(findings, sources={"sim.py": SOURCE, "other.py": SOURCE})
    headers = [row for row in out.splitlines() if re.match(r"^\S+\.py:\d+:\d+: WF", row)]
    # sorted by path, line, column
    assert [h.split(":")[0:2] for h in headers] == [
        ["other.py", "6"],
        ["sim.py", "3"],
        ["sim.py", "5"],
        ["sim.py", "6"],
    ]
    assert "WF202 [-] " in headers[1]
    assert re.search(r": WF203 `wp\.sqrt", headers[2]), "a finding without a fix has no marker"
    assert "Found 4 findings in 2 files." in out
    assert "[*] 2 fixable with `warpfix apply`." in out
    assert "[-] 1 more fixable with `warpfix apply --unsafe-fixes`." in out


def test_text_without_findings_and_with_errors() -> None:
    assert render_text([], files_checked=3).strip() == "All checks passed! (3 files checked)"
    out = render_text([], errors=[Error("bad.py", "invalid syntax (line 2)")], files_checked=2)
    assert "error: bad.py: invalid syntax (line 2)" in out
    assert "All checks passed" not in out
    assert "1 file could not be checked." in out


def test_text_caret_alignment_with_tabs_and_wide_characters() -> None:
    source = "x = 1\n\tname = '数値'; wp.copy(dst, src)\n"
    col = source.splitlines()[1].index("wp.copy") + 1
    finding = make("WF101", line=2, col=col, end_col=col + len("wp.copy(dst, src)"))
    lines = render_text([finding], sources={"sim.py": source}).splitlines()
    code = next(row for row in lines if row.startswith("2 | "))
    carets = next(row for row in lines if "^" in row)
    # the wide characters take two terminal cells each: compare display positions
    prefix = code[: code.index("wp.copy")]
    from rich.cells import cell_len

    assert carets.index("^") == cell_len(prefix)
    assert "\t" not in code


def test_text_multiline_span_underlines_rest_of_first_line_and_shows_related() -> None:
    related = ((Span("sim.py", 5, 5, 5, 15), "`i` is computed here"),)
    finding = make(line=4, col=7, end_line=6, end_col=3, related=related)
    lines = render_text([finding], sources={"sim.py": SOURCE}).splitlines()
    carets = next(row for row in lines if "^" in row)
    line4 = SOURCE.splitlines()[3]
    assert carets.count("^") == len(line4) - 6
    assert any(row.strip() == "= note: sim.py:5:5: `i` is computed here" for row in lines)


def test_text_missing_source_shows_the_finding_without_snippet(tmp_path) -> None:
    out = render_text([make(path=str(tmp_path / "gone.py"))])
    assert "WF702 [*]" in out
    assert "^" not in out


def test_text_reads_sources_from_disk_and_color_adds_ansi(tmp_path) -> None:
    path = tmp_path / "sim.py"
    path.write_text(SOURCE)
    out = render_text([make(path=str(path))], color=True)
    assert "\x1b[" in out
    assert "wp.sqrt(wp.dot(x[i], x[i]))" in re.sub(r"\x1b\[[0-9;]*m", "", out)


# -- json ---------------------------------------------------------------------------------------


def test_json_document_shape() -> None:
    findings = [make(line=6), make("WF202", line=3, col=1, end_col=5)]
    doc = json.loads(
        render_json(findings, warp_version="1.19.0", errors=[Error("bad.py", "boom")], files_checked=2)
    )
    assert doc["version"] == 1
    assert doc["warp_version"] == "1.19.0"
    assert doc["findings"] == [findings[1].to_json(), findings[0].to_json()]
    assert doc["errors"] == [{"path": "bad.py", "message": "boom"}]
    assert doc["files_checked"] == 2


# -- github -------------------------------------------------------------------------------------


def test_github_annotation_format() -> None:
    out = render_github([make()])
    assert out == (
        "::warning file=sim.py,line=6,col=14,endLine=6,endColumn=41,title=WF702 singular-point::"
        "`wp.sqrt(wp.dot(v, v))` has an unguarded adjoint at v = 0%0A[*] fix: Use `wp.length(v)`\n"
    )


def test_github_escaping_severity_and_multiline_spans() -> None:
    assert escape_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert escape_property("a,b:c%") == "a%2Cb%3Ac%25"
    findings = [
        make(path="dir,x/a:b.py", severity=Severity.ERROR, safety=FixSafety.NONE, message="x: 1, y\n2"),
        make(line=2, end_line=4, severity=Severity.INFO, safety=FixSafety.NONE),
    ]
    first, second = render_github(findings).splitlines()
    assert first.startswith("::error file=dir%2Cx/a%3Ab.py,line=6,col=14,")
    assert first.endswith("::x: 1, y%0A2")
    assert (
        second == "::notice file=sim.py,line=2,endLine=4,title=WF702 singular-point::" + findings[1].message
    )
    errors = render_github([], errors=[Error("bad.py", "invalid\nsyntax")])
    assert errors == "::error file=bad.py,title=warpfix%3A file not checked::invalid%0Asyntax\n"


# -- gitlab -------------------------------------------------------------------------------------


def test_gitlab_code_quality_issues() -> None:
    """Severity mapped to GitLab's; the fingerprint survives a line move and tells identical findings apart."""
    from warpfix.report.gitlab import render_gitlab

    findings = [make(), make(line=9, end_line=9), make(severity=Severity.ERROR, message="other")]
    issues = json.loads(render_gitlab(findings))
    assert [i["severity"] for i in issues] == ["minor", "major", "minor"]
    assert issues[0]["location"] == {"path": "sim.py", "lines": {"begin": 6, "end": 6}}
    assert issues[0]["description"] == f"WF702 {findings[0].message}" and issues[0]["check_name"] == "WF702"
    assert len({i["fingerprint"] for i in issues}) == 3
    moved = json.loads(render_gitlab([make(line=30, end_line=30)]))
    assert moved[0]["fingerprint"] == issues[0]["fingerprint"]


# -- diffs --------------------------------------------------------------------------------------


def _apply_hunks(old: str, hunks) -> str:
    lines = old.splitlines(keepends=True)
    for hunk in reversed(hunks):
        lines[hunk.start : hunk.end] = [hunk.text]
    return "".join(lines)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb\nc\n", "a\nc\n"),
        ("a\nc\n", "a\nb\nc\n"),
        ("a\nb", "a\nb\nc\n"),
        ("", "x = 1\n"),
        ("a\nb\nc\nd\ne\n", "z\nb\nc\nd\nE\nf\n"),
    ],
)
def test_line_hunks_rebuild_the_new_text(old: str, new: str) -> None:
    hunks = line_hunks(old, new)
    assert _apply_hunks(old, hunks) == new
    assert all(a.end <= b.start for a, b in zip(hunks, hunks[1:], strict=False))


def test_unified_diff() -> None:
    assert unified_diff("sim.py", "a\n", "a\n") == ""
    diff = unified_diff("sim.py", "a\nb\n", "a\nc")
    assert diff.splitlines() == [
        "--- a/sim.py",
        "+++ b/sim.py",
        "@@ -1,2 +1,2 @@",
        " a",
        "-b",
        "+c",
        "\\ No newline at end of file",
    ]
    both = render_diff({"b.py": "1\n", "a.py": "x\n"}, {"b.py": "2\n", "a.py": "y\n"})
    assert both.index("a/a.py") < both.index("a/b.py")


# -- dispatch -----------------------------------------------------------------------------------


def test_render_dispatches_every_format() -> None:
    result = Result([make()], [Error("bad.py", "boom")], files_checked=2)
    sources = {"sim.py": SOURCE}
    assert render("text", result, warp_version="1.19.0", sources=sources).startswith("sim.py:6:14: WF702")
    assert json.loads(render("json", result, warp_version="1.19.0"))["files_checked"] == 2
    sarif = json.loads(render("sarif", result, warp_version="1.19.0", sources=sources))
    assert sarif["runs"][0]["results"][0]["ruleId"] == "WF702"
    assert render("github", result, warp_version="1.19.0").startswith("::warning file=sim.py")
    full = render("full", result, warp_version="1.19.0", sources=sources)
    assert full == render("text", result, warp_version="1.19.0", sources=sources)
    concise = render("concise", result, warp_version="1.19.0", sources=sources)
    assert concise.splitlines()[0] == full.splitlines()[0] and "^" not in concise and "help:" not in concise
    assert "\nFound 1 finding in 1 file." in concise
    (line,) = render("json-lines", result, warp_version="1.19.0").splitlines()
    assert json.loads(line) == make().to_json()
    assert json.loads(render("gitlab", result, warp_version="1.19.0"))[0]["check_name"] == "WF702"
    assert set(FORMATS) == {"text", "full", "concise", "json", "json-lines", "sarif", "github", "gitlab"}
    with pytest.raises(ValueError, match="unknown output format"):
        render("xml", result, warp_version="1.19.0")


def test_verify_json_is_strict_json_with_one_spelling_of_non_finite_numbers() -> None:
    from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport

    sample = {"kind": "element", "index": 0, "ad": float("nan"), "fd": 1.0, "status": "fail",
              "reason": "AD is NaN", "steps": [[0.1, float("inf")], [0.01, float("-inf")]]}
    param = ParamResult("x", "fail", "NaN/inf", float("inf"), float("nan"), "AD is NaN", samples=[sample], planned=1)
    report = VerifyReport(backwards=[BackwardResult("train.py:3", float("nan"), [param])])
    text = json.dumps(report.to_json(), allow_nan=False)  # raises on a bare NaN/Infinity
    doc = json.loads(text)
    back = doc["backwards"][0]
    assert back["loss"] == "nan"
    assert (back["params"][0]["max_rel_err"], back["params"][0]["ad_fd_ratio"]) == ("inf", "nan")
    got = back["params"][0]["samples"][0]
    assert (got["ad"], got["fd"], got["steps"]) == ("nan", 1.0, [[0.1, "inf"], [0.01, "-inf"]])
    assert sample["ad"] != sample["ad"]  # the report's own values are left as they are
