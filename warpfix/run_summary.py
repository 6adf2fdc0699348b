"""What ``apply --check`` reads from a verify report: :func:`fd_summary`, the compact view :func:`warpfix.acceptance.judge`
compares between the runs before and after an edit (also shown in the report's tables and JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from warpfix.acceptance import INTEGRITY_RULES, RUNTIME_PROOF
from warpfix.verify.records import NO_LEAF_ERROR


def fd_summary(report: Any) -> dict[str, Any]:
    """A compact view of a VerifyReport for tables and JSON, with what :func:`judge` compares."""
    if report.error and not _no_leaf_reached(report):
        return {"verdict": "error", "error": report.error, "losses": []}
    verdicts = [p.verdict for b in report.backwards for p in b.params]
    errs = [p.max_rel_err for b in report.backwards for p in b.params if p.max_rel_err is not None]
    runtime = sorted({f.rule for f in report.findings if f.severity.value == "error"})  # WF902, WF903...
    integrity = sorted({f.rule for f in report.findings if f.rule in INTEGRITY_RULES})
    # one entry per integrity finding and array (family, else kernel argument): what an edit removed or left
    integrity_arrays = sorted({_integrity_key(f.rule, f.data) for f in report.findings if f.rule in RUNTIME_PROOF})
    if not verdicts:
        verdict = "none"
    elif "fail" in verdicts or runtime:
        verdict = "fail"
    elif all(v == "pass" for v in verdicts):
        verdict = "pass"
    else:
        verdict = "unreliable"
    first = [b for b in report.backwards if getattr(b, "window", 0) == 0]
    return {
        "verdict": verdict,
        # later windows start from parameters updated with the (now different) gradient: not comparable
        "losses": [b.loss for b in first],
        "max_rel_err": max(errs) if errs else None,
        "failing": sorted({f"{b.site}:{p.name}" for b in report.backwards for p in b.params if p.verdict == "fail"}),
        "runtime_findings": runtime,
        "integrity": integrity,
        "integrity_arrays": integrity_arrays,
        # per backward before the first parameter update: the sketch of each gradient FD checked
        "gradients": [{p.name: p.ad_sketch for p in b.params if getattr(p, "ad_sketch", None)} for b in first],
        # per backward before it: its FD verdict, and whether its objective is seeded by hand after the first
        "first_verdicts": [_backward_verdict([p.verdict for p in b.params]) if b.params else "none" for b in first],
        "seeded": [i > 0 and getattr(b, "objective", "loss") != "loss" for i, b in enumerate(first)],
        # per gradient FD compared there: FD along the direction it moved from the previous run's, if it did
        "discriminated": [p.discriminate for b in first for p in b.params if getattr(p, "discriminate", None)],
        # per backward before it: its loss is the array the previous one differentiated, added into on tapes only
        "running": [bool(getattr(b, "running", False)) for b in first],
        # per backward after it that FD checked: its verdict ("pass" when every parameter passed)
        "later": [_backward_verdict([p.verdict for p in b.params]) for b in report.backwards
                  if getattr(b, "window", 0) > 0 and b.params],
        # the loss of each backward after it: whether the update changed anything (an early-read proof)
        "later_losses": [b.loss for b in report.backwards if getattr(b, "window", 0) > 0],
    }


def _no_leaf_reached(report: Any) -> bool:
    """The program ran its backwards, but none reached a leaf parameter (a tape made per frame whose last
    recording, the one backward-ed, reads no parameter: a truncation): FD could not judge, which an edit
    may mend (verdict "none"), not a program that cannot be verified."""
    return bool(report.backwards) and not any(b.params for b in report.backwards) and str(report.error).startswith(NO_LEAF_ERROR)


def _backward_verdict(verdicts: Sequence[str]) -> str:
    for v in ("fail", "unreliable"):
        if v in verdicts:
            return v
    return "pass"


def _integrity_key(rule: str, data: dict[str, Any]) -> str:
    """``WF902 x`` for a finding about array (family) ``x``, with the operations where the finding names them
    (``WF902 psi by the array.zero_ after the launch of kernel rk3_substep``): the same whatever line an edit
    moved them to, and apart from the program's other overwrites of that family (navier_stokes's Poisson
    solve zeroes and rewrites ``psi`` on purpose)."""
    what = data.get("family") or data.get("array")
    if not what and data.get("kernel"):
        what = f"{data['kernel']}({data['argument']})" if data.get("argument") else str(data["kernel"])
    ops = (f" by the {data['writer']}" if data.get("writer") else "") + (
        f" after the {data['read_by']}" if data.get("read_by") else "")
    return f"{rule} {what or '?'}{ops}"
