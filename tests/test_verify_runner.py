"""Fast tests of the verify command plumbing: command translation, report JSON and exit codes."""

from __future__ import annotations

from warpfix.finding import Severity
from warpfix.verify import run_verify
from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport, make_finding, report_from_probe


def test_command_that_runs_no_python_program_is_exit_2_in_one_line(tmp_path):
    report = run_verify(["bash", "-c", "true"], cwd=str(tmp_path))
    assert report.exit_code == 2
    assert "the probe produced no result" in (report.error or "")
    assert "\n" not in report.error


def test_missing_command_is_exit_2(tmp_path):
    assert run_verify([], cwd=str(tmp_path)).exit_code == 2
    report = run_verify(["/nonexistent/python", "x.py"], cwd=str(tmp_path))
    assert report.exit_code == 2 and report.error.startswith("cannot run")


def _report(*verdicts: str) -> VerifyReport:
    params = [ParamResult(f"p{i}", v, "dense" if v == "fail" else "", 0.5, 1.5) for i, v in enumerate(verdicts)]
    return VerifyReport(backwards=[BackwardResult("train.py:51", 1.28, params)])


def test_exit_codes():
    assert _report("pass", "pass").exit_code == 0
    assert _report("pass", "unreliable").exit_code == 0
    assert _report("pass", "fail").exit_code == 1
    r = _report("pass")
    r.findings.append(make_finding("WF903", "train.py", 60, "grad not zero"))
    assert r.exit_code == 1
    r = _report("fail")
    r.error = "crashed"
    assert r.exit_code == 2


def test_json_keeps_the_documented_keys():
    r = _report("fail")
    r.findings.append(make_finding("WF904", "train.py", 51, "FD blind", {"param": "mu"}))
    doc = r.to_json()
    assert doc["version"] == 1
    assert doc["backwards"][0]["site"] == "train.py:51"
    assert doc["backwards"][0]["loss"] == 1.28
    p = doc["backwards"][0]["params"][0]
    assert {k: p[k] for k in ("name", "max_rel_err", "verdict", "signature")} == {
        "name": "p0", "max_rel_err": 0.5, "verdict": "fail", "signature": "dense",
    }  # fmt: skip
    f = doc["findings"][0]
    assert (f["rule"], f["name"], f["severity"], f["path"], f["line"]) == (
        "WF904", "fd-unreliable", "info", "train.py", 51,
    )  # fmt: skip


def test_first_iteration_keeps_window_0():
    r = _report("pass")
    r.backwards.append(BackwardResult("train.py:51", 1.1, [], window=1))
    assert [b.loss for b in r.first_iteration] == [1.28]
    assert [b["window"] for b in r.to_json()["backwards"]] == [0, 1]


def test_report_from_probe_payload():
    raw = {
        "backwards": [{"site": "a.py:3", "loss": 2.0, "params": [
            {"name": "k", "verdict": "fail", "signature": "all-zero", "max_rel_err": 1.0, "ad_fd_ratio": 0.0}
        ]}],
        "findings": [{"rule": "WF905", "path": "a.py", "line": 2, "message": "tracker", "data": {"kernel": "f"}}],
        "error": None,
        "stopped": "window-end",
    }  # fmt: skip
    r = report_from_probe(raw)
    assert r.backwards[0].params[0].signature == "all-zero"
    assert r.findings[0].severity is Severity.WARNING and r.findings[0].data == {"kernel": "f"}
    assert r.stopped == "window-end" and r.exit_code == 1


def test_runtime_finding_keeps_library_line_classification_and_count():
    raw = {
        "backwards": [],
        "findings": [{
            "rule": "WF905", "path": "train.py", "line": 40, "message": "argument `x_new` written while read",
            "data": {"count": 48}, "classified_as": "WF103", "severity": "error",
            "related": [{"path": "newton/_src/solvers/solver.py", "line": 1068, "message": "the library line"}],
        }],
    }  # fmt: skip
    report = report_from_probe(raw)
    (f,) = report.findings
    assert (f.path, f.line, f.severity) == ("train.py", 40, Severity.ERROR)
    assert f.related[0][0].path == "newton/_src/solvers/solver.py" and f.related[0][0].line == 1068
    assert "48 occurrences" in f.message and "[shape of WF103]" in f.message
    doc = report.to_json()["findings"][0]
    assert doc["classified_as"] == "WF103" and doc["data"]["classified_as"] == "WF103"
    assert doc["related"][0]["line"] == 1068
