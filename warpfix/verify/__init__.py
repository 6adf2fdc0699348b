"""Harness-free finite-difference verification of `wp.Tape` gradients (`warpfix verify`).

API for other parts of warpfix (e.g. `apply --check`)::

    from warpfix.verify import run_verify

    report = run_verify(["python", "train.py", "--small"], cwd="project/", timeout=120.0)
    report.exit_code          # 0 no failure, 1 a gradient failed, 2 could not verify (see report.error)
    for b in report.backwards:  # one per tape.backward(loss) of the first two training iterations
        b.window                # 0: first iteration, 1: the next (its losses follow an optimizer step)
        for p in b.params:      # p.name, p.verdict ("pass"|"fail"|"unreliable"), p.signature,
            ...                 # p.max_rel_err, p.ad_fd_ratio, p.reason
    report.findings           # list[Finding]: WF901-WF905, WF804; WF201 (data["runtime"] "cut-chain"),
                              # WF302/WF304 ("early-grad"), WF601 ("tape-cover"): static shapes seen at runtime
    report.to_json()          # {"version": 1, "backwards": [...], "findings": [...], ...}

Verdicts: ``pass``/``fail`` only where FD is judged sound (two agreeing step sizes, a replay
that reproduces the loss exactly); otherwise ``unreliable`` with the reason (WF904:
cancellation, below-resolution, noise, kink-or-chaos, kink-at-evaluation-point, chaos,
non-finite-loss).

How it runs: the command runs exactly as given, in its own process group (ended with any
children on exit, timeout and Ctrl-C); the probe enters the program's own interpreter through a
``sitecustomize`` on ``PYTHONPATH`` and needs only warp and numpy there. A backward seeded with
``grads=`` or by hand (``out.grad.fill_(1.0); tape.backward()``) is judged on the seeded
objective ``sum(seed * output)``. Graph capture (``wp.ScopedCapture``, ``capture_launch``, CPU or
CUDA) records no graph under the probe: each ``capture_launch`` replays the captured calls
eagerly and traced (the report says so). FD compares the parameters the program updates from
gradients (else the first few leaves), within a time budget. Runtime findings sit at the
program's line (the library line as ``related``), one per launch/copy and array family, with
``data["classified_as"]`` naming the static rule of their shape.

FD replays start where the window's first tape begins recording (set-up before it is not replayed;
a parameter's uses there are constants, as to autodiff). Warp's native array routines (scans, sorts,
BSR assembly, ``array_sum/inner``) and prepared launches (``record_cmd=True``, warp.optim's solvers)
are traced and replayed like launches. Memory the window holds is not freed while it may be replayed
(``ptr=`` views of freed temporaries, warp.fem's ``release()``), so replays never touch freed memory.

Known limits: values the program computes on the host from a parameter are constants to both
autodiff and FD (reported in the parameter's reason); ``Tape.record_func`` closures are not replayed,
nor are native calls outside the routines above (a BVH or hash-grid build); when a replay does not
reproduce the loss, FD reports noise (WF904) instead of a verdict; integer and float16 arrays are
never perturbed.
"""

from warpfix.verify.report import BackwardResult, ParamResult, VerifyReport
from warpfix.verify.runner import run_verify

__all__ = ["BackwardResult", "ParamResult", "VerifyReport", "run_verify"]
