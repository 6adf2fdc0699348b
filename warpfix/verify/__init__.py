"""Harness-free finite-difference verification of `wp.Tape` gradients (`warpfix verify`).

API for other parts of warpfix (e.g. `apply --check`)::

    from warpfix.verify import run_verify

    report = run_verify(["python", "train.py", "--small"], cwd="project/", timeout=120.0)
    report.exit_code          # 0 no failure, 1 a gradient failed, 2 could not verify (see report.error)
    for b in report.backwards:  # one per tape.backward(loss) of the first training iteration
        for p in b.params:      # p.name, p.verdict ("pass"|"fail"|"unreliable"), p.signature,
            ...                 # p.max_rel_err, p.ad_fd_ratio, p.reason
    report.findings           # list[Finding]: WF901-WF905, WF804
    report.to_json()          # {"version": 1, "backwards": [...], "findings": [...], ...}
"""

from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport
from warpfix.verify.runner import run_verify

__all__ = ["BackwardResult", "ParamResult", "VerifyReport", "run_verify"]
