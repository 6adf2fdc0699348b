"""Turn findings into source edits: the one entry point every fixer calls.

``warpfix apply``, the LSP code actions and the pre-commit hook all go through
:func:`compute_edits`. It never touches the file system: it receives the project's
sources (path -> text, the same path strings the findings' spans use) and returns the
rewritten texts of the files that changed.

Each finding is handed to the codemod registered for its rule (``codemods.COMMANDS``).
A codemod rewrites exactly the place the finding names, and may rewrite other files
too (WF401: the kernel's signature plus every launch site). Findings are applied one
after another, bottom-up inside a file; the line numbers of the findings still to come
are mapped through every earlier rewrite, and a finding whose line was itself rewritten
by an earlier edit is skipped (run ``apply`` again: the checker sees the new code).

A finding is skipped, with a reason, when its rule has no codemod, when its fix is
diagnostic only or unsafe (and ``unsafe`` is false), when no tape records its code
(``data["taped"] is False``: RULES.md allows automatic edits only in taped code; an
absent key counts as taped), when its detector already knows why no edit can fix it
(``data["no_edit"]``), when its codemod finds the place not mechanically rewritable, or when a
rewrite would not compile.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile

from codemods import COMMANDS, NotApplicable
from warpfix.finding import Finding, FixSafety
from warpfix.model.taped import UNTAPED

__all__ = ["UNTAPED", "FixResult", "compute_edits"]


@dataclass
class FixResult:
    """The outcome of :func:`compute_edits`."""

    new_sources: dict[str, str] = field(default_factory=dict)  # only the files that changed
    applied: list[Finding] = field(default_factory=list)
    skipped: list[tuple[Finding, str]] = field(default_factory=list)  # (finding, why)
    # what an applied rewrite wants the user to know (WF601: the memory the hoist adds), by id(finding)
    notes: dict[int, str] = field(default_factory=dict)

    def note(self, finding: Finding) -> str:
        """``"; <note>"`` for an applied finding whose codemod left a summary, else ``""``."""
        text = self.notes.get(id(finding))
        return f"; {text}" if text else ""


class _LineMap:
    """Maps line numbers of the original text through successive rewrites of one file."""

    def __init__(self) -> None:
        self._steps: list[list[tuple[str, int, int, int, int]]] = []

    def record(self, old: str, new: str) -> None:
        matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
        self._steps.append(matcher.get_opcodes())

    def map(self, line: int) -> int | None:
        """The current number of an original (1-based) line, None when it was rewritten."""
        index = line - 1
        for opcodes in self._steps:
            for tag, i1, i2, j1, _j2 in opcodes:
                if i1 <= index < i2:
                    if tag != "equal":
                        return None
                    index = j1 + (index - i1)
                    break
            else:
                return None
        return index + 1


#: rules whose fix goes first among findings at one place: the WF601 hoist rebuilds the window loop, and a fix of
#: the per-window backward it replaces (WF301's zero) would only stand in its way (re-checked next round)
FIRST_AT_A_PLACE = ("WF601",)


def _order(finding: Finding) -> tuple:
    span = finding.span
    return (span.path, -span.line, -span.column, finding.rule not in FIRST_AT_A_PLACE, finding.rule)


def _allowed(finding: Finding, unsafe: bool) -> str | None:
    """Why the finding's fix may not be applied, or None."""
    if finding.rule not in COMMANDS:
        return f"no automatic fix for {finding.rule}"
    # the detector knows the codemod refuses (WF403), or the program observes what the fix changes (model.pinned)
    refusal = finding.data.get("no_edit")
    if isinstance(refusal, str):
        return UNTAPED if finding.data.get("taped") is False else refusal
    safety = finding.fix.safety
    if safety is FixSafety.NONE:
        return "diagnostic only: no fix"
    if safety is FixSafety.UNSAFE and not unsafe:
        return "unsafe fix: needs --unsafe-fixes"
    if finding.data.get("taped") is False:
        return UNTAPED
    return None


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out = []
    for f in findings:
        key = (f.rule, f.span)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def compute_edits(sources: dict[str, str], findings: list[Finding], *, unsafe: bool = False) -> FixResult:
    """Rewrite ``sources`` to fix ``findings``.

    ``sources`` maps a path (as used in ``finding.span.path``) to the file's text; it must
    hold every file a codemod may need to rewrite (for kernel-signature fixes: all project
    files that may launch the kernel). Unsafe fixes run only with ``unsafe=True``.
    Returns the changed files only; ``sources`` itself is not modified.
    """
    result = FixResult()
    current = dict(sources)
    maps: dict[str, _LineMap] = {}
    made: dict[tuple, Finding] = {}  # the edit each applied finding's codemod made, by what it was asked

    for finding in sorted(_unique(findings), key=_order):
        reason = _allowed(finding, unsafe)
        same = made.get(_asked(finding)) if reason is None else None
        if same is not None:
            # another rule's finding at the same place asking the same codemod the same: its edit is this fix too
            result.applied.append(finding)
            result.notes[id(finding)] = f"the same edit as the {same.rule} fix at line {same.line}"
            continue
        if reason is None:
            reason = _apply_one(finding, current, maps, result.notes)
        if reason is None:
            result.applied.append(finding)
            made[_asked(finding)] = finding
        else:
            result.skipped.append((finding, reason))

    result.new_sources = {p: s for p, s in current.items() if s != sources.get(p)}
    return result


def _asked(finding: Finding) -> tuple:
    """What a finding asks of its codemod: the codemod, the place, and the data it reads (not the rule)."""
    data = tuple(sorted((k, repr(v)) for k, v in finding.data.items() if k != "taped"))
    return COMMANDS.get(finding.rule), finding.path, finding.line, finding.span.column, data


def _apply_one(
    finding: Finding, current: dict[str, str], maps: dict[str, _LineMap], notes: dict[int, str]
) -> str | None:
    """Apply one finding's codemod to ``current`` in place; return why not, or None. A codemod's
    ``scratch["summary"]`` is kept in ``notes``."""
    path = finding.path
    if path not in current:
        return f"{path}: source not given"
    line = maps[path].map(finding.line) if path in maps else finding.line
    if line is None:
        return "its line was rewritten by an earlier fix; run apply again"

    command_class = COMMANDS[finding.rule]
    rewritten: dict[str, str] = {}
    # shared by the runs over several files of one cross-file rewrite; "sources" lets a codemod
    # resolve imports between the project's files (which launch sites name the finding's kernel)
    scratch: dict = {"sources": current}
    for target in command_class.paths_for(finding, current):
        context = CodemodContext(filename=target, scratch=scratch)
        command = command_class.from_finding(context, finding, line=line)
        try:
            module = cst.parse_module(current[target])
        except cst.ParserSyntaxError as exc:
            return f"{target}: cannot parse ({exc.message})"
        try:
            new_code = command.transform_module(module).code
        except NotApplicable as exc:
            return str(exc)
        except SkipFile:
            continue
        if new_code == current[target]:
            continue
        try:
            compile(new_code, target, "exec")
        except SyntaxError as exc:  # a codemod bug: never write code that does not compile
            return f"rewrite of {target} would not compile ({exc.msg}, line {exc.lineno})"
        rewritten[target] = new_code

    if path not in rewritten:
        return f"nothing to rewrite at {path}:{line}"
    reason = command_class.incomplete(scratch)
    if reason is not None:
        return reason
    for target, new_code in rewritten.items():
        maps.setdefault(target, _LineMap()).record(current[target], new_code)
        current[target] = new_code
    if scratch.get("summary"):
        notes[id(finding)] = str(scratch["summary"])
    return None
