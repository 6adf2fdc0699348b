"""Runtime findings as the static findings whose codemods fix them (issue 9, item 3).

`warpfix verify` classifies an overwrite, alias or accumulation it saw at runtime to the static rule
that names its shape (``classified_as``: WF301 for a WF903, WF105 for a zeroed read array, ...). Where
`check` found nothing of that rule there (a shape the static model does not follow: a training step
driven by a library callback), ``apply --check`` can still offer that rule's codemod at the user's
line the runtime finding points at, and prove it with the verifier like any other fix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span

#: A static finding of the same rule this close to the runtime one is the same bug (check found it).
SAME_BUG_LINES = 2
#: rules whose codemod needs what the static model found, which a runtime finding's line does not give
#: (WF601's hoist: the frame loop, the tape, the loss it accumulates); their runtime findings prove fixes only
NEEDS_STATIC = frozenset({"WF601"})


def _source_key(path: str, cwd: str, sources: Mapping[str, str]) -> str | None:
    """The key of ``sources`` naming the file a runtime finding's path (relative to ``cwd``) points at."""
    target = os.path.normpath(os.path.join(os.path.abspath(cwd), path))
    for key in sources:
        if os.path.normpath(os.path.abspath(key)) == target:
            return key
    return None


def runtime_fixes(
    findings: Iterable[Finding], cwd: str, sources: Mapping[str, str], static: Iterable[Finding]
) -> list[Finding]:
    """The classified runtime error ``findings`` (paths relative to ``cwd``, where the program ran) as
    static findings of their rule with that rule's fix, in the files of ``sources``, except where
    ``static`` (what `check` reported) already has a finding of the rule: one per rule and line."""
    from codemods import COMMANDS  # noqa: PLC0415 - libcst is loaded only when fixes are planned
    from warpfix.rules import rule_by_id  # noqa: PLC0415

    known = [(f.rule, os.path.abspath(f.path), f.line) for f in static]
    out: dict[tuple[str, str, int], Finding] = {}
    for finding in findings:
        if finding.severity is not Severity.ERROR:  # a warning: verify could not confirm it reaches a gradient
            continue
        rule_id = finding.data.get("classified_as")
        rule = rule_by_id(rule_id) if isinstance(rule_id, str) else None
        if rule is None or rule.id in NEEDS_STATIC or rule.id not in COMMANDS or rule.fix_safety is FixSafety.NONE:
            continue
        path, at = finding.path, finding.line
        backward = finding.data.get("backward")  # a leftover gradient (WF903 at its read): fixed at its backward
        if isinstance(backward, str) and backward.rpartition(":")[2].isdigit():
            path, at = backward.rpartition(":")[0], int(backward.rpartition(":")[2])
        key = _source_key(path, cwd, sources)
        if key is None:  # a library line, or a file apply was not asked to fix
            continue
        here = os.path.abspath(key)
        if any(r == rule.id and p == here and abs(line - at) <= SAME_BUG_LINES for r, p, line in known):
            continue
        out.setdefault((rule.id, key, at), Finding(
            rule=rule.id,
            name=rule.name,
            severity=Severity.ERROR,
            span=Span(key, at, 1, at, 1),
            message=f"{finding.message} (seen at runtime by `warpfix verify` as {finding.rule})",
            fix=Fix(rule.fix_safety, rule.fix_description),
            data={"taped": True, "runtime": finding.rule},  # the runtime saw it on a tape
        ))  # fmt: skip
    return list(out.values())
