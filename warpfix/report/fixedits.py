"""The concrete edit of one finding's fix, for formats that carry edits (SARIF, the LSP).

``warpfix.fixes.compute_edits`` rewrites exactly the place a finding names; a codemod may
touch several files (a launch site in another module), so the result is a mapping of every
changed path to its (old, new) text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from warpfix.finding import Finding, FixSafety


def fix_changes(
    sources: Mapping[str, str], findings: Sequence[Finding], *, unsafe: bool
) -> dict[str, tuple[str, str]]:
    """``path -> (old, new)`` for every file the fixes of ``findings`` change (empty if none apply)."""
    return fix_outcome(sources, findings, unsafe=unsafe)[0]


def fix_outcome(
    sources: Mapping[str, str], findings: Sequence[Finding], *, unsafe: bool
) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """:func:`fix_changes`, and why each finding whose fix is made by no edit was skipped."""
    from warpfix.fixes import compute_edits

    fixable = [
        f for f in findings if f.fix.safety is FixSafety.SAFE or (unsafe and f.fix.safety is FixSafety.UNSAFE)
    ]
    if not fixable:
        return {}, []
    result = compute_edits(dict(sources), fixable, unsafe=unsafe)
    changes = {
        path: (sources.get(path, ""), new)
        for path, new in result.new_sources.items()
        if new != sources.get(path)
    }
    return changes, [why for _, why in result.skipped]
