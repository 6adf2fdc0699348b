"""Fast tests of the verify command plumbing: command translation, report JSON and exit codes."""

from __future__ import annotations

import sys

import pytest

from warpfix.finding import Severity
from warpfix.verify import run_verify
from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport, make_finding, report_from_probe
from warpfix.verify.runner import probe_command

PROBE = [sys.executable, "-m", "warpfix.verify.probe"]


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        (["python", "train.py", "--small"], ["--script", "train.py", "--", "--small"]),
        (["python3.11", "-u", "train.py"], ["--script", "train.py", "--"]),
        (["/usr/bin/python", "-W", "ignore", "-m", "pkg.train", "-x"], ["--module", "pkg.train", "--", "-x"]),
        (["train.py", "a"], ["--script", "train.py", "--", "a"]),
    ],
)
def test_probe_command_keeps_script_and_argv(cmd, expected):
    assert probe_command(cmd) == PROBE + expected


@pytest.mark.parametrize(
    ("cmd", "message"),
    [
        ([], "no command"),
        (["python", "-c", "print(1)"], "-c"),
        (["python", "-m"], "module name"),
        (["bash", "run.sh"], "must run a Python script or module"),
    ],
)
def test_probe_command_rejects(cmd, message):
    with pytest.raises(ValueError, match=message):
        probe_command(cmd)


def test_unsupported_command_is_exit_2_without_running_anything(tmp_path):
    report = run_verify(["bash", "-c", "true"], cwd=str(tmp_path))
    assert report.exit_code == 2
    assert "must run a Python script or module" in (report.error or "")


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
