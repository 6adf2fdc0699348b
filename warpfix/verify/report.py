"""The result of `warpfix verify`: per-backward verdicts plus findings, as objects and as JSON."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.report.json_out import strict_json

JSON_VERSION = 1

#: rule -> (name, severity, fix description) for the findings verify emits.
RULE_INFO: dict[str, tuple[str, Severity, str]] = {
    "WF901": ("gradient-mismatch", Severity.ERROR, "find the taping bug with `warpfix check`; the signature says which kind"),
    "WF902": ("mutated-after-record", Severity.ERROR, "move the write after tape.backward(), or write into a fresh array"),
    "WF903": ("accumulated-grad", Severity.ERROR, "call tape.zero() (or zero the .grad) before the next backward"),
    "WF904": ("fd-unreliable", Severity.INFO, "verify this gradient another way (smaller problem, float64, fixed seed)"),
    "WF905": ("tracker-warning", Severity.WARNING, "give the overwritten array its own memory on the tape"),
    "WF804": ("adjoint-mismatch", Severity.ERROR, "fix the adjoint math of the @wp.func_grad"),
    # static rules verify also observes at runtime (data["runtime"] says which check: cut-chain, early-grad,
    # tape-cover)
    "WF201": ("missing-requires-grad", Severity.ERROR, "allocate the array with requires_grad=True"),
    "WF302": ("scope-hygiene", Severity.ERROR, "move the gradient read after tape.backward()"),
    "WF304": ("stale-grad-read", Severity.ERROR, "move the gradient read after tape.backward()"),
    "WF601": ("per-window-tape", Severity.ERROR,
              "record every frame the loss depends on on one tape, with one backward after the frame loop"),
}


@dataclass
class ParamResult:
    """The comparison for one leaf parameter at one backward."""

    name: str
    verdict: str  # "pass" | "fail" | "unreliable"
    signature: str  # WF901 signature ("" when passing), e.g. "constant factor 2x"
    max_rel_err: float | None
    ad_fd_ratio: float | None
    reason: str = ""  # why FD is unreliable (WF904), or extra detail
    ad_sketch: dict[str, Any] | None = None  # the autodiff gradient in a few numbers (warpfix.verify.sketch)
    # FD along the direction this gradient moved from an earlier run's (warpfix.verify.discriminate.decide)
    discriminate: dict[str, Any] | None = None
    # each perturbation FD measured (kind, index, ad, fd, status, reason, [step, fd] per rung of its ladder)
    samples: list[dict[str, Any]] = field(default_factory=list)
    planned: int | None = None  # how many perturbations a verdict was to rest on (the budget may cut them)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "max_rel_err": self.max_rel_err,
            "ad_fd_ratio": self.ad_fd_ratio,
            "verdict": self.verdict,
            "signature": self.signature,
            "reason": self.reason,
        }
        if self.samples:
            out["counts"] = dict(Counter(s["status"] for s in self.samples), planned=self.planned)
            out["samples"] = self.samples
        return out


@dataclass
class BackwardResult:
    """One `tape.backward(loss)` call of the traced window."""

    site: str  # "train.py:51" (path relative to cwd)
    loss: float | None
    params: list[ParamResult] = field(default_factory=list)
    note: str = ""  # why this backward could not be compared, when it could not
    window: int = 0  # 0: the first training iteration, 1: the next one
    objective: str = "loss"  # what the backward differentiates: the loss, or seeded outputs (grads=, by hand)
    # the loss array the previous backward of the iteration differentiated, since written only on tapes
    running: bool = False
    loss_only: bool = False  # past the cap: run for the value of its objective alone

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "site": self.site,
            "loss": self.loss,
            "window": self.window,
            "params": [p.to_json() for p in self.params],
        }
        if self.note:
            out["note"] = self.note
        if self.objective != "loss":
            out["objective"] = self.objective
        for key in ("running", "loss_only"):
            if getattr(self, key):
                out[key] = True
        return out


@dataclass
class VerifyReport:
    """What `run_verify` returns.

    ``exit_code``: 0 when no comparison failed (pass or unreliable), 1 when any parameter
    failed or an error-severity finding was raised, 2 when the program could not be verified
    (crash, timeout, no backward, a backward without a loss) — ``error`` then says why.
    """

    backwards: list[BackwardResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    stopped: str = ""  # why the probe stopped tracing: "window-end", "cap", "program-exit", ...
    program_output: str = ""  # tail of the program's stdout/stderr, for error reports
    notes: list[str] = field(default_factory=list)  # how the program was run (graph capture run eagerly, ...)
    probe_seconds: dict[str, float] = field(default_factory=dict)  # the probe's own time: trace, integrity, fd

    @property
    def first_iteration(self) -> list[BackwardResult]:
        """The backwards of the first training iteration (window 0). Later windows run after an
        optimizer step, so their losses depend on the gradients: compare forwards on these only."""
        return [b for b in self.backwards if b.window == 0]

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 2
        if any(p.verdict == "fail" for b in self.backwards for p in b.params):
            return 1
        if any(f.severity is Severity.ERROR for f in self.findings):
            return 1
        return 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": JSON_VERSION,
            "backwards": [b.to_json() for b in self.backwards],
            "findings": [
                {**f.to_json(), "classified_as": f.data.get("classified_as")}
                for f in sorted(self.findings, key=Finding.sort_key)
            ],
            "exit_code": self.exit_code,
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if self.probe_seconds:
            out["probe_seconds"] = dict(self.probe_seconds)
        if self.error is not None:
            out["error"] = self.error
        if self.stopped:
            out["stopped"] = self.stopped
        return strict_json(out)


def _span(path: str, line: int) -> Span:
    return Span(path=path, line=line, column=1, end_line=line, end_column=1)


def make_finding(
    rule: str,
    path: str,
    line: int,
    message: str,
    data: dict[str, Any] | None = None,
    *,
    classified_as: str | None = None,
    related: list[dict[str, Any]] | None = None,
    severity: str | None = None,
) -> Finding:
    """Build a verify finding located at the start of a source line (the program's line).

    ``classified_as`` is the static rule that names the runtime finding's shape (kept in
    ``data["classified_as"]`` for the fixer, and said in the message); ``related`` holds the
    library line that called Warp.
    """
    name, default_severity, fix = RULE_INFO[rule]
    data = dict(data or {})
    count = data.get("count", 1)
    if count > 1:
        message = f"{message} ({count} occurrences: one per step or array of the family)"
    if classified_as:
        data["classified_as"] = classified_as
        message = f"{message} [shape of {classified_as}]"
    return Finding(
        rule=rule,
        name=name,
        severity=Severity(severity) if severity else default_severity,
        span=_span(path, line),
        message=message,
        fix=Fix(FixSafety.NONE, fix),
        data=data,
        related=tuple((_span(r["path"], int(r["line"])), r.get("message", "")) for r in related or ()),
    )


def report_from_probe(raw: dict[str, Any]) -> VerifyReport:
    """Turn the probe's JSON payload into a report."""
    backwards = [
        BackwardResult(
            site=b["site"],
            loss=b.get("loss"),
            params=[
                ParamResult(
                    name=p["name"],
                    verdict=p["verdict"],
                    signature=p.get("signature", ""),
                    max_rel_err=p.get("max_rel_err"),
                    ad_fd_ratio=p.get("ad_fd_ratio"),
                    reason=p.get("reason", ""),
                    ad_sketch=p.get("ad_sketch"),
                    discriminate=p.get("discriminate"),
                    samples=list(p.get("samples", [])),
                    planned=p.get("planned"),
                )
                for p in b.get("params", [])
            ],
            note=b.get("note", ""),
            window=b.get("window", 0),
            objective=b.get("objective", "loss"),
            running=bool(b.get("running")),
            loss_only=bool(b.get("loss_only")),
        )
        for b in raw.get("backwards", [])
    ]
    findings = [
        make_finding(f["rule"], f["path"], int(f["line"]), f["message"], f.get("data"),
                     classified_as=f.get("classified_as"), related=f.get("related"), severity=f.get("severity"))  # fmt: skip
        for f in raw.get("findings", [])
    ]
    return VerifyReport(backwards=backwards, findings=findings, error=raw.get("error"), stopped=raw.get("stopped", ""),
                        notes=list(raw.get("notes", [])), probe_seconds=dict(raw.get("seconds", {})))  # fmt: skip
