"""The finding: what every rule reports and every output format serialises."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class FixSafety(str, Enum):
    SAFE = "safe"  # forward values unchanged, gradients become correct: applied by `warpfix apply`
    UNSAFE = "unsafe"  # changes the model or needs a human decision: only with --unsafe-fixes
    NONE = "none"  # diagnostic only


@dataclass(frozen=True, order=True, slots=True)
class Span:
    """A source range. Lines and columns are 1-based; end is exclusive in columns (like ruff)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __reduce__(self) -> tuple:
        # a slotted dataclass pickles through dataclasses.fields() per object: spans are many
        return Span, (self.path, self.line, self.column, self.end_line, self.end_column)


@dataclass(frozen=True)
class Fix:
    safety: FixSafety
    description: str


def not_automatic(description: str, reason: str) -> str:
    """A fix's description once ``apply`` is known to refuse it (the finding keeps no marker)."""
    return f"{description}; not automatic: {reason}"


@dataclass(frozen=True)
class Finding:
    rule: str  # "WF101"
    name: str  # "copy-writeback"
    severity: Severity
    span: Span
    message: str
    fix: Fix
    # Rule-specific facts a codemod needs to rewrite exactly this place (names, kernel, param, ...).
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # Other places that explain the finding (the earlier read, the tape, the allocation).
    related: tuple[tuple[Span, str], ...] = field(default=(), compare=False)

    @property
    def path(self) -> str:
        return self.span.path

    @property
    def line(self) -> int:
        return self.span.line

    def sort_key(self) -> tuple:
        s = self.span
        return (s.path, s.line, s.column, self.rule)

    def to_json(self) -> dict[str, Any]:
        s = self.span
        out: dict[str, Any] = {
            "rule": self.rule,
            "name": self.name,
            "severity": self.severity.value,
            "path": s.path,
            "line": s.line,
            "column": s.column,
            "end_line": s.end_line,
            "end_column": s.end_column,
            "message": self.message,
            "fix": {"safety": self.fix.safety.value, "description": self.fix.description},
        }
        if self.related:
            out["related"] = [
                {"path": sp.path, "line": sp.line, "column": sp.column, "message": msg}
                for sp, msg in self.related
            ]
        if self.data:
            out["data"] = self.data
        return out
