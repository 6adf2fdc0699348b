"""``warpfix apply``: findings -> codemods -> (optionally) FD proof -> files.

Two ways to decide what is kept:

* :func:`plan_fixes` keeps every fix its codemod could make (safe ones; unsafe ones with
  ``unsafe=True``), re-checking the rewritten code and fixing again until nothing more
  changes (bounded), so a second ``apply`` finds nothing to do.
* :func:`check_fixes` proves each edit (DESIGN.md, "Acceptance of an edit"): the verifier
  runs the user's entry command on the original project, the codemod rewrites a scratch
  copy, the verifier runs on the copy, and the edit is kept only when every checked
  backward's loss of the first iteration is unchanged (within float tolerance; when the
  edit merges backwards, as the WF601 hoist does, their total) and FD agreement is a pass.
  Findings of one rule in one file (the components of one matrix, the stores of one kernel)
  are judged together first; the rest one by one; fixes that fail alone are then tried
  together in rule order (one bug can mask another). After keeping edits the code is checked
  again, bounded by ``rounds``.

Nothing here writes the user's files: :func:`write_changes` does, atomically, and only
for the files of kept edits.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from warpfix.config import Config
from warpfix.engine import CheckResult, check_paths, check_sources
from warpfix.finding import Finding
from warpfix.fixes import compute_edits
from warpfix.fsutil import write_texts
from warpfix.procs import scratch_run

#: runtime checks that a recorded array kept its values until its backward (mutated-after-record, the
#: overwrite tracker): they judge an overwrite fix where finite differences cannot (chaotic programs)
INTEGRITY_RULES = ("WF902", "WF905")
#: the fixes that may merge or split backwards (the WF601 hoist: one tape over the windows), judged on the
#: iteration's total loss; any other fix that changes how many backwards precede the first parameter update
#: is judged on the backwards both runs have
MERGING_FIXES = ("WF601",)
#: the fixes that remove an overwrite of a recorded array
OVERWRITE_FIXES = ("WF101", "WF102", "WF103", "WF104", "WF105", "WF106", "WF107", "WF108", "WF303", "WF401")
#: runtime finding -> the fixes whose effect it observes, per array: where FD cannot judge, such a fix is
#: proven when the findings about its arrays go away (the overwrite checks; WF903, a gradient already
#: non-zero when the next iteration's backward starts, for the missing zero)
RUNTIME_PROOF = {"WF902": OVERWRITE_FIXES, "WF905": OVERWRITE_FIXES, "WF903": ("WF301",)}
LOSS_RTOL = 1e-4  # the forward must not change: float32 reordering stays far below this
LOSS_ATOL = 1e-7


@dataclass
class Edit:
    """One finding's fix and what became of it."""

    finding: Finding
    kept: bool
    reason: str
    fd_before: dict[str, Any] | None = None
    fd_after: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.finding.rule,
            "path": self.finding.path,
            "line": self.finding.line,
            "kept": self.kept,
            "reason": self.reason,
            "fd_before": self.fd_before,
            "fd_after": self.fd_after,
        }


@dataclass
class ApplyResult:
    edits: list[Edit] = field(default_factory=list)
    originals: dict[str, str] = field(default_factory=dict)  # path -> text before (changed files only)
    changed: dict[str, str] = field(default_factory=dict)  # path -> text after
    remaining: list[Finding] = field(default_factory=list)  # findings of the final code
    errors: list[str] = field(default_factory=list)  # one line each: files that could not be read, skipped

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "edits": [e.to_json() for e in self.edits],
            "findings": [f.to_json() for f in self.remaining],
        }


@dataclass(frozen=True)
class Selection:
    select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    config: Config | None = None
    warp_version: tuple[int, ...] | None = None
    use_cache: bool = True


def _initial(paths: Sequence[str], sel: Selection, sources: dict[str, str] | None = None) -> tuple[CheckResult, list[str]]:
    if sources is not None:  # stdin: the text stands for the file, its imports are read from disk
        result = check_sources(sources, select=sel.select, ignore=sel.ignore, config=sel.config,
                               warp_version=sel.warp_version, follow_imports=True)
    else:
        result = check_paths(
            paths, select=sel.select, ignore=sel.ignore, config=sel.config, use_cache=sel.use_cache,
            warp_version=sel.warp_version,
        )
    errors = [f"{e.path}: {e.message}" for e in result.errors]
    return result, errors


def _recheck(sources: dict[str, str], sel: Selection) -> list[Finding]:
    return check_sources(
        sources, select=sel.select, ignore=sel.ignore, config=sel.config, warp_version=sel.warp_version
    ).findings


def _fixable(findings: Sequence[Finding], unsafe: bool) -> list[Finding]:
    return [f for f in findings if f.fix.safety.value == "safe" or (unsafe and f.fix.safety.value == "unsafe")]


def plan_fixes(
    paths: Sequence[str], *, selection: Selection = Selection(), unsafe: bool = False, rounds: int = 4,
    sources: dict[str, str] | None = None,
) -> ApplyResult:
    """Compute every applicable fix without proving it; nothing is written. Files that cannot be
    read or parsed are in ``errors`` and skipped; ``sources`` (path -> text) replaces ``paths``."""
    check, errors = _initial(paths, selection, sources)
    out = ApplyResult(errors=errors)
    original = dict(check.sources)
    current = dict(original)
    findings = check.findings
    reported: dict[tuple, Edit] = {}
    for _ in range(rounds):
        result = compute_edits(current, _fixable(findings, unsafe), unsafe=unsafe)
        for finding, why in result.skipped:
            reported.setdefault((finding.rule, finding.path, finding.line), Edit(finding, False, why))
        for finding in result.applied:
            reported[(finding.rule, finding.path, finding.line)] = Edit(
                finding, True, "applied" + result.note(finding)
            )
        if not result.new_sources:
            break
        current.update(result.new_sources)
        findings = _recheck(current, selection)
    out.edits = [e for e in reported.values() if e.kept] + [e for e in reported.values() if not e.kept]
    out.remaining = findings
    out.changed = {p: t for p, t in current.items() if t != original[p]}
    out.originals = {p: original[p] for p in out.changed}
    return out


# ------------------------------------------------------------------------------------ --check
def fd_summary(report: Any) -> dict[str, Any]:
    """A compact view of a VerifyReport for tables and JSON."""
    if report.error:
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
    return {
        "verdict": verdict,
        # later windows start from parameters updated with the (now different) gradient: not comparable
        "losses": [b.loss for b in report.backwards if getattr(b, "window", 0) == 0],
        "max_rel_err": max(errs) if errs else None,
        "failing": sorted({f"{b.site}:{p.name}" for b in report.backwards for p in b.params if p.verdict == "fail"}),
        "runtime_findings": runtime,
        "integrity": integrity,
        "integrity_arrays": integrity_arrays,
    }


def _integrity_key(rule: str, data: dict[str, Any]) -> str:
    """``WF902 x`` for a finding about array (family) ``x``: the same whatever line an edit moved it to."""
    what = data.get("family") or data.get("array")
    if not what and data.get("kernel"):
        what = f"{data['kernel']}({data['argument']})" if data.get("argument") else str(data["kernel"])
    return f"{rule} {what or '?'}"


def judge(before: dict[str, Any], after: dict[str, Any], rules: Sequence[str] = ()) -> tuple[bool, str]:
    """Whether an edit is proven by the verifier runs around it, and why (not).

    ``rules``: the rules of the edit's findings. When FD cannot judge after the edit (chaos) and every
    edit removes an overwrite, the runtime integrity check decides: its findings (WF902/WF905) before
    the edit, none after, with the loss unchanged.
    """
    if after["verdict"] == "error":
        return False, f"the rewritten program could not be verified: {after['error']}"
    lb, la = before["losses"], after["losses"]
    if None in lb or None in la:
        return False, "a checked backward has no loss value to compare"
    merged = len(lb) != len(la)
    if merged and rules and not any(r in MERGING_FIXES for r in rules):
        # the same iterations compared, like with like: the first iteration ends at its first parameter
        # update, and a fix that makes the program train (an optimizer step moved out of the tape) ends it
        # earlier, so fewer backwards precede it; each backward both runs have must match
        if not lb or not la:
            return False, f"the edit changed the backwards ({len(lb)} -> {len(la)}): none to compare"
        if len(la) > len(lb):
            # the rewritten program updates its parameters later or never (a parameter rebound away from
            # the optimizer that holds it): it no longer trains as it did
            return False, (f"the edit delays or removes the first parameter update ({len(lb)} -> {len(la)} "
                           "backwards before it): the program no longer trains as it did")
        for i, (a, b) in enumerate(zip(lb, la, strict=False)):
            if not math.isclose(a, b, rel_tol=LOSS_RTOL, abs_tol=LOSS_ATOL):
                return False, f"the loss changed at backward {i + 1} ({a} -> {b}): the forward is not preserved"
        loss = (f"loss unchanged at the {min(len(lb), len(la))} backward(s) both runs have before the first "
                f"parameter update (the edit moved that update: {len(lb)} -> {len(la)} backwards before it)")
    elif merged:
        # backwards merged or split (one tape over the windows, WF601): the iteration's objective
        # is the sum of what was differentiated, and that must not change
        a, b = math.fsum(lb), math.fsum(la)
        if not math.isclose(a, b, rel_tol=LOSS_RTOL, abs_tol=LOSS_ATOL):
            return False, (
                f"the edit changed the backwards ({len(lb)} -> {len(la)}) and their total loss ({a} -> {b})"
            )
        loss = f"total loss of {len(lb)} -> {len(la)} backwards unchanged"
    else:
        for i, (a, b) in enumerate(zip(lb, la, strict=True)):
            if not math.isclose(a, b, rel_tol=LOSS_RTOL, abs_tol=LOSS_ATOL):
                return False, f"the loss changed at backward {i + 1} ({a} -> {b}): the forward is not preserved"
        loss = "loss unchanged"
    if after["verdict"] == "unreliable" and rules and all(r in OVERWRITE_FIXES for r in rules):
        found, left = before.get("integrity") or [], after.get("integrity") or []
        other_errors = set(after.get("runtime_findings") or []) - set(INTEGRITY_RULES)
        if found and not left and not other_errors:
            return True, (
                f"{loss}; FD is unreliable here, so the runtime integrity check decided: "
                f"{', '.join(found)} before the edit, clean after (no recorded array changes before its backward)"
            )
    if after["verdict"] == "unreliable" and rules:
        # findings the program had before the edit about other arrays (an overwrite it makes on purpose, under
        # its own custom adjoint) stay: the edit must remove some of them, about its arrays, and add none
        proving = {r for r, fixes in RUNTIME_PROOF.items() if all(x in fixes for x in rules)}
        was = {k for k in before.get("integrity_arrays") or [] if k.split()[0] in proving}
        now = {k for k in after.get("integrity_arrays") or [] if k.split()[0] in proving}
        # no runtime error the program did not have before, other than those the edit is judged by
        other_errors = set(after.get("runtime_findings") or []) - proving - set(before.get("runtime_findings") or [])
        if was and now < was and not other_errors:
            remain = f"; {', '.join(sorted(now))} (there before the edit too) remain" if now else ""
            return True, (
                f"{loss}; FD is unreliable here, so the runtime checks decided: the edit removed "
                f"{', '.join(sorted(was - now))} and added none{remain}"
            )
    if after["verdict"] != "pass":
        what = {"fail": "FD still disagrees", "none": "no gradient was compared",
                "unreliable": "FD is unreliable here"}[after["verdict"]]
        if after["verdict"] == "fail" and after.get("integrity"):
            what += f" ({', '.join(after['integrity'])}: a recorded array still changes before its backward)"
        return False, f"{what} after the edit"
    if before["verdict"] == "pass":
        return True, f"{loss}; FD agreed before and after"
    return True, f"{loss}; FD agreement now passes"


def check_fixes(
    paths: Sequence[str],
    command: Sequence[str],
    *,
    root: str = ".",
    selection: Selection = Selection(),
    unsafe: bool = False,
    rounds: int = 3,
    device: str | None = None,
    timeout: float = 120.0,
    verify: Callable[..., Any] | None = None,
) -> ApplyResult:
    """Prove every fix with the verifier before keeping it; nothing is written.

    ``root`` is the project folder the command runs in (copied for each trial); every file
    to fix must lie under it. ``verify`` defaults to :func:`warpfix.verify.run_verify`.
    """
    if verify is None:
        from warpfix.verify import run_verify as verify
    from warpfix.verify.fixable import runtime_fixes
    check, errors = _initial(paths, selection)
    out = ApplyResult(errors=errors)
    root = os.path.abspath(root)
    outside = [p for p in check.sources if os.path.relpath(os.path.abspath(p), root).startswith("..")]
    if outside:
        out.errors.append(f"{outside[0]}: outside the project folder {root}; cannot check it")
        return out

    reports: list[Any] = []

    def run(files: dict[str, str]) -> dict[str, Any]:
        absolute = {os.path.abspath(p): t for p, t in files.items()}
        report = scratch_run(root, absolute, command, lambda cmd, cwd: verify(cmd, cwd=cwd, device=device,
                                                                              timeout=timeout))
        reports.append(report)
        return fd_summary(report)

    original = dict(check.sources)
    current = dict(original)
    try:
        baseline = run({})
    except ValueError as exc:  # the command names a program the scratch copy cannot hold
        out.errors.append(str(exc))
        return out
    if baseline["verdict"] == "error":
        out.errors.append(f"cannot verify the original program: {baseline['error']}")
        return out

    # what verify saw at runtime and `check` missed, as the static findings whose codemods fix it
    findings = [*check.findings, *runtime_fixes(reports[0].findings, root, original, check.findings)]
    decided: set[tuple] = set()
    for _ in range(rounds):
        # every finding of this round refers to `start`; compute_edits maps lines through the kept fixes
        start = dict(current)
        kept: list[Finding] = []
        failed: list[tuple[Finding, dict[str, Any], dict[str, Any], str]] = []
        pending = [f for f in sorted(_fixable(findings, unsafe), key=lambda f: (f.rule, f.path, f.line))
                   if (f.rule, f.path, f.line) not in decided]
        for group in _siblings(pending):
            # several findings of one rule in one file (the components of one matrix, the stores of one
            # kernel) usually interact: judged together first, like with like, before one by one
            trial = compute_edits(start, [*kept, *group], unsafe=unsafe)
            if len(trial.applied) != len(kept) + len(group):
                continue
            after = run(_changed(original, {**start, **trial.new_sources}))
            ok, why = judge(baseline, after, [f.rule for f in group])
            if not ok:
                continue
            kept.extend(group)
            current = {**start, **trial.new_sources}
            for finding in group:
                decided.add((finding.rule, finding.path, finding.line))
                out.edits.append(Edit(finding, True, f"{why} (judged together with the {len(group) - 1} other "
                                      f"{finding.rule} finding(s) of {finding.path}){trial.note(finding)}",
                                      baseline, after))
            baseline = after
        for finding in pending:
            key = (finding.rule, finding.path, finding.line)
            if key in decided:
                continue
            decided.add(key)
            trial = compute_edits(start, [*kept, finding], unsafe=unsafe)
            if not any(f is finding for f in trial.applied):
                why = next((w for f, w in trial.skipped if f is finding), "no fix")
                out.edits.append(Edit(finding, False, why))
                continue
            if len(trial.applied) != len(kept) + 1:
                lost = [k for k in kept if not any(a is k for a in trial.applied)]
                names = ", ".join(f"{k.rule} at line {k.line}" for k in lost) or "a fix kept before"
                out.edits.append(Edit(finding, False, f"conflicts with the kept fix ({names}): both rewrite the "
                                      "same statements"))
                continue
            after = run(_changed(original, {**start, **trial.new_sources}))
            ok, why = judge(baseline, after, [finding.rule])
            if ok:
                kept.append(finding)
                current = {**start, **trial.new_sources}
                out.edits.append(Edit(finding, True, why + trial.note(finding), baseline, after))
                baseline = after
            else:
                failed.append((finding, baseline, after, why))
        if len(failed) > 1:  # fixes that only work together (one bug masking another), in rule order
            together = compute_edits(start, [*kept, *(item[0] for item in failed)], unsafe=unsafe)
            joined = [item[0] for item in failed if any(a is item[0] for a in together.applied)]
            if len(joined) > 1 and all(any(a is k for a in together.applied) for k in kept):
                after = run(_changed(original, {**start, **together.new_sources}))
                ok, why = judge(baseline, after, [f.rule for f in joined])
                if ok:
                    current = {**start, **together.new_sources}
                    for finding in joined:
                        out.edits.append(Edit(
                            finding, True, f"{why} (only together with the others){together.note(finding)}",
                            baseline, after,
                        ))
                    failed = [item for item in failed if not any(item[0] is f for f in joined)]
                    kept.extend(joined)
                    baseline = after
        for finding, before, after, why in failed:
            out.edits.append(Edit(finding, False, why, before, after))
        if not kept:
            break
        findings = _recheck(current, selection)
    out.remaining = _recheck(current, selection) if current != original else check.findings
    out.changed = _changed(original, current)
    out.originals = {p: original[p] for p in out.changed}
    return out


def _siblings(findings: Sequence[Finding]) -> list[list[Finding]]:
    """Groups of two or more findings sharing a rule and a file, in order."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.rule, f.path), []).append(f)
    return [g for g in groups.values() if len(g) > 1]


def _changed(original: dict[str, str], current: dict[str, str]) -> dict[str, str]:
    return {p: t for p, t in current.items() if t != original.get(p)}


# ------------------------------------------------------------------------------------ writing
def write_changes(result: ApplyResult) -> list[str]:
    """Write the changed files (see :func:`warpfix.fsutil.write_texts`); returns one-line errors.

    Every file is read back first and compared with the text the fixes started from, so a
    file edited meanwhile is left alone.
    """
    return write_texts(result.originals, result.changed)
