"""``warpfix apply``: findings -> codemods -> (optionally) FD proof -> files.

Two ways to decide what is kept:

* :func:`plan_fixes` keeps every fix its codemod could make (safe ones; unsafe ones with
  ``unsafe=True``), re-checking the rewritten code and fixing again until nothing more
  changes (bounded), so a second ``apply`` finds nothing to do.
* :func:`check_fixes` proves each edit (DESIGN.md, "Acceptance of an edit"): the verifier
  runs the user's entry command on the original project, the codemod rewrites a scratch
  copy, the verifier runs on the copy, and :func:`warpfix.acceptance.judge` decides whether
  the edit is kept (the forward preserved, and FD or the runtime checks proving the edit).
  Findings of one rule in one file (the components of one matrix, the stores of one kernel)
  are judged together first; the rest one by one; fixes that fail alone are then tried
  together in rule order (one bug can mask another). After keeping edits the code is checked
  again, bounded by ``rounds``.

Nothing here writes the user's files: :func:`write_changes` does, atomically, and only
for the files of kept edits.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from warpfix.acceptance import judge
from warpfix.config import Config
from warpfix.engine import CheckResult, check_paths, check_sources
from warpfix.finding import Finding
from warpfix.fixes import compute_edits
from warpfix.fsutil import write_texts
from warpfix.procs import scratch_run
from warpfix.report.json_out import strict_json
from warpfix.run_summary import fd_summary

#: Seconds the verifier's FD may take at least in each ``apply --check`` run (``verify`` alone: 15): its
#: verdicts decide which edits are kept, and a program whose iteration is costly to replay needs this many
#: perturbations to be judged at all.
CHECK_FD_FLOOR_S = 60.0


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
        return strict_json({
            "version": 1,
            "edits": [e.to_json() for e in self.edits],
            "findings": [f.to_json() for f in self.remaining],
            "errors": [_error_json(e) for e in self.errors],
        })


def _error_json(line: str) -> dict[str, Any]:
    """``{"path", "message"}`` of a one-line error (``check``'s JSON shape); ``path`` is null for an error
    about no one file (the original program could not be verified)."""
    path, sep, message = line.partition(": ")
    if sep and os.path.lexists(path):
        return {"path": path, "message": message}
    return {"path": None, "message": line}


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


def _fixable(findings: Sequence[Finding], unsafe: bool, *, refused: bool = False) -> list[Finding]:
    """The findings with a fix to apply; with ``refused``, also those whose detector says why no edit
    fixes them (``data["no_edit"]``), for compute_edits to report with that reason."""
    return [f for f in findings if f.fix.safety.value == "safe" or (unsafe and f.fix.safety.value == "unsafe")
            or (refused and isinstance(f.data.get("no_edit"), str))]


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
        result = compute_edits(current, _fixable(findings, unsafe, refused=True), unsafe=unsafe)
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
    to fix must lie under it. ``verify`` defaults to :func:`warpfix.verify.run_verify`, whose runs save their
    gradients so that FD can measure along what an edit changed (:mod:`warpfix.verify.discriminate`).
    """
    if verify is not None:
        return _check_fixes(paths, command, root, selection, unsafe, rounds, device, timeout, verify, None)
    from warpfix.verify import run_verify

    with tempfile.TemporaryDirectory(prefix="warpfix-gradients-") as gradients:
        return _check_fixes(paths, command, root, selection, unsafe, rounds, device, timeout,
                            functools.partial(run_verify, fd_floor=CHECK_FD_FLOOR_S), gradients)


def _check_fixes(
    paths: Sequence[str], command: Sequence[str], root: str, selection: Selection, unsafe: bool, rounds: int,
    device: str | None, timeout: float, verify: Callable[..., Any], gradients: str | None,
) -> ApplyResult:
    from warpfix.verify.fixable import runtime_fixes
    check, errors = _initial(paths, selection)
    out = ApplyResult(errors=errors)
    root = os.path.abspath(root)
    outside = [p for p in check.sources if os.path.relpath(os.path.abspath(p), root).startswith("..")]
    if outside:
        out.errors.append(f"{outside[0]}: outside the project folder {root}; cannot check it")
        return out

    reports: list[Any] = []

    def run(files: dict[str, str], against: dict[str, Any] | None = None) -> dict[str, Any]:
        absolute = {os.path.abspath(p): t for p, t in files.items()}
        extra: dict[str, Any] = {}
        if gradients is not None:  # this run's gradients, FD along each one that moved from ``against``'s
            extra["save_gradients"] = tempfile.mkdtemp(dir=gradients)
            extra["against_gradients"] = (against or {}).get("gradients_saved")
        report = scratch_run(root, absolute, command, lambda cmd, cwd: verify(cmd, cwd=cwd, device=device,
                                                                              timeout=timeout, **extra))
        reports.append(report)
        return {**fd_summary(report), "gradients_saved": extra.get("save_gradients")}

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
            after = run(_changed(original, {**start, **trial.new_sources}), baseline)
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
            if {**start, **trial.new_sources} == current:  # the edit a kept fix made already fixes this one
                kept.append(finding)
                out.edits.append(Edit(finding, True, f"proven with that fix{trial.note(finding)}", baseline, baseline))
                continue
            after = run(_changed(original, {**start, **trial.new_sources}), baseline)
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
                after = run(_changed(original, {**start, **together.new_sources}), baseline)
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
