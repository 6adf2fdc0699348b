"""Harness-free finite-difference verification of `wp.Tape` gradients (`warpfix verify`).

API for other parts of warpfix (e.g. `apply --check`)::

    from warpfix.verify import run_verify

    report = run_verify(["python", "train.py", "--small"], cwd="project/", timeout=120.0)
    report.exit_code          # 0 no failure, 1 a gradient failed, 2 could not verify (see report.error)
    for b in report.backwards:  # one per tape.backward(loss) of the first two training iterations
        b.window                # 0: first iteration, 1: the next (its losses follow an optimizer step)
        for p in b.params:      # p.name, p.verdict ("pass"|"fail"|"unreliable"), p.signature,
            ...                 # p.max_rel_err, p.ad_fd_ratio, p.reason
    report.findings           # list[Finding]: WF901-WF905, WF804
    report.to_json()          # {"version": 1, "backwards": [...], "findings": [...], ...}

Verdicts: ``pass``/``fail`` only where FD is judged sound (two agreeing step sizes, a replay
that reproduces the loss exactly); otherwise ``unreliable`` with the reason (WF904:
cancellation, below-resolution, noise, kink-or-chaos, chaos, non-finite-loss).

Known limits: only ``python script.py`` / ``python -m module`` commands; values the program
computes on the host from a parameter are constants to both autodiff and FD (reported in the
parameter's reason); ``Tape.record_func`` closures and CUDA graph capture are not replayed;
integer and float16 arrays are never perturbed.
"""

from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport
from warpfix.verify.runner import run_verify

__all__ = ["BackwardResult", "ParamResult", "VerifyReport", "run_verify"]
