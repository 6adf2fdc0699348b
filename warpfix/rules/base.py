"""The rule: one class per RULES.md entry (Fixit style).

A rule has a stable ID, a name, a severity, a fix safety, a doc with fixed sections
(ruff style) and embedded examples. ``VALID`` snippets must produce no finding of the
rule; ``INVALID`` snippets mark every expected finding with a trailing ``# expect: WFnnn``
comment on the line where the finding starts. ``tests/test_rule_examples.py`` turns
every example of every registered rule into a test case.

A snippet is either a string (one file, ``main.py``) or a mapping of relative paths to
sources (a multi-file project; the first file is the entry).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span

if TYPE_CHECKING:
    from warpfix.model import Project
    from warpfix.model.facts import Trace

Snippet = "str | dict[str, str]"


@dataclass(frozen=True)
class RuleDoc:
    what: str  # what it does
    why: str  # why it is wrong
    example: str  # buggy code
    use_instead: str  # fixed code
    fix: str  # fix safety explained
    versions: str = "All supported Warp versions behave the same."


@dataclass(frozen=True)
class Example:
    code: str | dict[str, str]
    # For invalid examples: the expected rewrite (codemod tests), same shape as ``code``.
    expected_fix: str | dict[str, str] | None = None
    # Warp version the example assumes, e.g. "1.16.0" (for version-gated rules).
    warp_version: str | None = None
    note: str = ""


@dataclass
class Rule:
    """Base class. Subclasses set the class attributes and implement :meth:`check`."""

    id: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    fix_safety: ClassVar[FixSafety]
    fix_description: ClassVar[str]
    doc: ClassVar[RuleDoc]
    VALID: ClassVar[list[Example]] = []
    INVALID: ClassVar[list[Example]] = []

    warp_version: tuple[int, ...] = field(default=(1, 19, 0))

    def applies_to_warp(self, version: tuple[int, ...]) -> bool:
        """Whether the rule is meaningful for this Warp version (WF102: only < 1.17)."""
        return True

    # -- the check: one pass over the host traces, then the project ---------------------
    # The engine streams the traces (each one dropped once every rule has seen it): a rule reads a
    # trace in :meth:`check_trace` and keeps what it needs of it (state set up by :meth:`begin`);
    # :meth:`check_project` runs after the last trace, with ``project.trace_summary`` complete.
    def begin(self, project: Project) -> None:
        """Set up the state a check keeps across traces (called before the first trace)."""

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        """The findings of one host trace (traces come in trace order)."""
        return iter(())

    def check_project(self, project: Project) -> Iterator[Finding]:
        """The findings that need no trace, or every trace seen."""
        return iter(())

    def check(self, project: Project) -> Iterator[Finding]:
        """Every finding of the rule, run alone over ``project``'s kept traces."""
        self.begin(project)
        for trace in project.traces:
            yield from self.check_trace(project, trace)
        yield from self.check_project(project)

    # -- helpers for subclasses -------------------------------------------------------
    def finding(
        self,
        span: Span,
        message: str,
        *,
        fix_description: str | None = None,
        fix_safety: FixSafety | None = None,
        severity: Severity | None = None,
        data: dict | None = None,
        related: tuple[tuple[Span, str], ...] = (),
    ) -> Finding:
        return Finding(
            rule=self.id,
            name=self.name,
            severity=severity or self.severity,
            span=span,
            message=message,
            fix=Fix(fix_safety or self.fix_safety, fix_description or self.fix_description),
            data=data or {},
            related=related,
        )

    @classmethod
    def render_doc(cls) -> str:
        d = cls.doc
        return (
            f"# {cls.id} {cls.name} ({cls.severity.value}, fix: {cls.fix_safety.value})\n\n"
            f"## What it does\n{d.what}\n\n## Why is this bad?\n{d.why}\n\n"
            f"## Example\n```python\n{d.example.strip()}\n```\n\n"
            f"## Use instead\n```python\n{d.use_instead.strip()}\n```\n\n"
            f"## Fix safety\n{d.fix}\n\n## Warp versions\n{d.versions}\n"
        )
