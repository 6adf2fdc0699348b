"""WF000 unused-suppression: a suppression comment that names no rule or suppresses nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.rules.base import Example, Rule, RuleDoc
from warpfix.suppress import UNUSED_ID, UNUSED_NAME

if TYPE_CHECKING:
    from warpfix.model import Project


class UnusedSuppression(Rule):
    id = UNUSED_ID
    name = UNUSED_NAME
    severity = Severity.WARNING
    fix_safety = FixSafety.NONE
    fix_description = "remove the ID from the comment"
    doc = RuleDoc(
        what="Reports `# warpfix: ignore[...]` and `# warpfix: ignore-file[...]` comments that name an unknown "
        "rule ID, or that suppress no finding although every rule they name ran on the file (like ruff's "
        "RUF100). A bare `# warpfix: ignore` is reported when nothing on its line was found while every rule ran.",
        why="A stale suppression hides the next real finding on that line, and a mistyped ID suppresses nothing.",
        example="x = wp.zeros(n)  # warpfix: ignore[WF201]   (no WF201 finding on this line any more)",
        use_instead="x = wp.zeros(n)",
        fix="None: remove the comment, or the ID, by hand.",
        versions="An ID is only called unused when its rule applies to the installed Warp version.",
    )
    VALID = [
        Example("import warp as wp\nx = wp.zeros(3)  # warpfix: ignore[WF201]\n",
                note="WF201 did not run (only WF000 is selected): not called unused"),
    ]
    INVALID = [
        Example("import warp as wp\nx = wp.zeros(3)  # warpfix: ignore[WF999]  # expect: WF000\n"),
    ]

    def check_project(self, project: Project) -> Iterator[Finding]:
        """Nothing here: the engine's suppression pass (:func:`warpfix.suppress.filter_findings`)
        reports WF000, since only it sees every other rule's findings."""
        return iter(())
