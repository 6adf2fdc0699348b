"""The base of every warpfix codemod: a libcst codemod command that rewrites one finding.

A command is built from a finding (:meth:`FindingCommand.from_finding`) or from the
command line of ``python -m libcst.tool codemod -x codemods.<module>.<Class> --no-format
--file PATH --line N [--column C] [--<data key> VALUE ...] PATH...``. It locates its
place by line (and column where several candidates share a line), plans its edits
against the original tree in :meth:`FindingCommand.plan`, and the edits are then applied
in one transformer pass, so every untouched node keeps its formatting and comments.

:class:`NotApplicable` (a :class:`~libcst.codemod.SkipFile`) says why a place cannot be
rewritten mechanically; ``compute_edits`` reports it as the reason a finding was skipped.
Whether a place may be rebound (``check_rebindable``): :mod:`codemods._rebind`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand
from libcst.metadata import CodeRange, ParentNodeProvider, PositionProvider

from codemods._cst import dotted
from codemods._rebind import RebindChecks
from codemods._resolve import same_file
from warpfix.finding import Finding

N = TypeVar("N", bound=cst.CSTNode)


class NotApplicable(SkipFile):
    """The finding's place cannot be rewritten mechanically; the message says why."""


@dataclass
class _Edit:
    replace: Callable[[cst.CSTNode], cst.CSTNode] | None = None
    remove: bool = False
    before: list[cst.CSTNode] = field(default_factory=list)
    after: list[cst.CSTNode] = field(default_factory=list)


class _Collector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        return True


class FindingCommand(RebindChecks, VisitorBasedCodemodCommand):
    """Rewrite the place of one finding. Subclasses set ``RULES``/``DATA`` and write :meth:`plan`."""

    RULES: ClassVar[tuple[str, ...]] = ()
    #: ``finding.data`` keys the codemod reads -> help text (also the ``--<key>`` CLI options).
    DATA: ClassVar[dict[str, str]] = {}
    #: Whether the rewrite may touch files other than the finding's own (launch sites).
    CROSS_FILE: ClassVar[bool] = False
    METADATA_DEPENDENCIES = (PositionProvider, ParentNodeProvider)

    def __init__(
        self,
        context: CodemodContext,
        line: int | None = None,
        column: int | None = None,
        file: str | None = None,
        **data: Any,
    ) -> None:
        super().__init__(context)
        self.line = line
        self.column = column
        self.file = file
        self.data: dict[str, Any] = {k: data.get(k) for k in self.DATA}
        self.tree: cst.Module = cst.Module(body=())
        self._edits: dict[int, _Edit] = {}

    # -- construction ---------------------------------------------------------------
    @classmethod
    def add_args(cls, arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--file", help="path of the file the finding is in (default: every file)")
        arg_parser.add_argument("--line", type=int, required=True, help="1-based line of the finding")
        arg_parser.add_argument("--column", type=int, help="1-based column of the finding")
        for key, text in cls.DATA.items():
            arg_parser.add_argument(f"--{key.replace('_', '-')}", dest=key, help=text)

    @classmethod
    def from_finding(cls, context: CodemodContext, finding: Finding, *, line: int | None = None) -> FindingCommand:
        """The command for ``finding``; ``line`` overrides the span's line (after earlier edits)."""
        return cls(
            context,
            line=finding.line if line is None else line,
            column=finding.span.column,
            file=finding.path,
            **{k: finding.data.get(k) for k in cls.DATA},
        )

    @classmethod
    def paths_for(cls, finding: Finding, sources: dict[str, str]) -> list[str]:
        """The files the rewrite may touch; the finding's own file first."""
        return [finding.path]

    @classmethod
    def incomplete(cls, scratch: dict[str, Any]) -> str | None:
        """After a run over every file of :meth:`paths_for`: why the rewrite is unusable, or None."""
        return None

    # -- the pass -------------------------------------------------------------------
    def in_target_file(self) -> bool:
        return self.file is None or same_file(self.context.filename, self.file)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        if not self.CROSS_FILE and not self.in_target_file():
            raise SkipFile("not the finding's file")
        self.tree = tree
        self._edits = {}
        self.plan(tree)
        if not self._edits:
            raise SkipFile("nothing to rewrite")
        return tree.visit(self)

    def plan(self, tree: cst.Module) -> None:
        """Find the place and register edits (:meth:`replace`, :meth:`remove`, ...)."""
        raise NotImplementedError

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        updated = super().on_leave(original_node, updated_node)
        edit = self._edits.get(id(original_node))
        if edit is None:
            return updated
        if edit.replace is not None:
            updated = edit.replace(updated)
        if edit.remove:
            if edit.before or edit.after:
                return cst.FlattenSentinel([*edit.before, *edit.after])
            return cst.RemovalSentinel.REMOVE
        if edit.before or edit.after:
            return cst.FlattenSentinel([*edit.before, updated, *edit.after])
        return updated

    # -- edits ------------------------------------------------------------------------
    def _edit(self, node: cst.CSTNode) -> _Edit:
        return self._edits.setdefault(id(node), _Edit())

    def replace(self, node: cst.CSTNode, new: cst.CSTNode | Callable[[Any], cst.CSTNode]) -> None:
        """Replace ``node``; ``new`` may be a function of the updated node."""
        self._edit(node).replace = new if callable(new) else (lambda _old: new)

    def remove(self, stmt: cst.BaseStatement) -> None:
        """Delete a statement; a block left empty gets ``pass``."""
        parent = self.parent(stmt)
        body = getattr(parent, "body", ())
        live = [s for s in body if not (id(s) in self._edits and self._edits[id(s)].remove)]
        if isinstance(parent, cst.IndentedBlock) and live == [stmt] and not self._edit(stmt).before:
            self._edit(stmt).after.append(cst.SimpleStatementLine([cst.Pass()]))
        self._edit(stmt).remove = True

    def remove_small(self, small: cst.BaseSmallStatement) -> None:
        """Delete a small statement; its line goes too when it was the only one on it."""
        line = self.parent(small)
        assert isinstance(line, cst.SimpleStatementLine)
        if len(line.body) == 1:
            self.remove(line)
        else:
            self._edit(small).remove = True

    def not_applicable(self, why: str) -> NotApplicable:
        """``why``, prefixed with the finding's line (once: a ``where`` of ``check_rebindable`` may name it)."""
        prefix = f"line {self.line}:"
        return NotApplicable(why if why.startswith(prefix) else f"{prefix} {why}")

    def insert_before(self, anchor: cst.BaseStatement, stmts: Sequence[cst.BaseStatement]) -> None:
        """Insert statements before ``anchor``; the first takes over the anchor's leading comments."""
        if not stmts:
            return
        edit = self._edit(anchor)
        leading = getattr(anchor, "leading_lines", ())
        if leading and not edit.before:
            first = stmts[0].with_changes(leading_lines=leading)
            stmts = [first, *stmts[1:]]
            previous = edit.replace

            def strip(node: cst.CSTNode) -> cst.CSTNode:
                node = previous(node) if previous else node
                return node.with_changes(leading_lines=())

            edit.replace = strip
        edit.before.extend(stmts)

    def insert_definitions(self, anchor: cst.BaseStatement, defs: Sequence[cst.BaseStatement]) -> None:
        """Put module-level definitions just before ``anchor``, two blank lines around each."""
        blank = [cst.EmptyLine(), cst.EmptyLine()]
        self.insert_before(anchor, [defs[0], *(d.with_changes(leading_lines=blank) for d in defs[1:])])
        edit = self._edit(anchor)
        previous = edit.replace
        edit.replace = lambda node: (previous(node) if previous else node).with_changes(leading_lines=blank)

    def insert_after(self, anchor: cst.BaseStatement, stmts: Sequence[cst.BaseStatement]) -> None:
        self._edit(anchor).after.extend(stmts)

    def move_after(self, stmt: cst.BaseStatement, anchor: cst.BaseStatement) -> None:
        """Move ``stmt`` (with its comments) to just after ``anchor``; earlier moves stay first."""
        self.remove(stmt)
        self._edit(anchor).after.append(stmt)

    def move_before(self, stmt: cst.BaseStatement, anchor: cst.BaseStatement) -> None:
        self.remove(stmt)
        self._edit(anchor).before.append(stmt)

    # -- lookup -------------------------------------------------------------------------
    def pos(self, node: cst.CSTNode) -> CodeRange:
        return self.get_metadata(PositionProvider, node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode:
        return self.get_metadata(ParentNodeProvider, node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        while not isinstance(node, cst.Module):
            node = self.parent(node)
            yield node

    def nodes(self, root: cst.CSTNode, kind: type[N] | tuple[type[N], ...]) -> list[N]:
        """All nodes of ``kind`` under ``root`` (included), in source order."""
        collector = _Collector()
        root.visit(collector)
        return [n for n in collector.nodes if isinstance(n, kind)]

    def on_line(self, kind: type[N] | tuple[type[N], ...], test: Callable[[N], bool] = lambda _n: True) -> N:
        """The node of ``kind`` passing ``test`` that the finding points at.

        Candidates are nodes whose range covers the finding's line; among them the one
        starting on that line (nearest the column when given) wins, then the innermost.
        """
        if self.line is None:
            raise NotApplicable("no line given")
        found = [n for n in self.nodes(self.tree, kind) if self._covers(n) and test(n)]
        if not found:
            raise NotApplicable(f"line {self.line}: {self.describe_missing()}")

        def rank(n: cst.CSTNode) -> tuple[int, int, int]:
            r = self.pos(n)
            starts = r.start.line == self.line
            col = abs(r.start.column + 1 - self.column) if starts and self.column else 0
            size = (r.end.line - r.start.line) * 10_000 + (r.end.column - r.start.column)
            return (0 if starts else 1, col, size)

        return min(found, key=rank)

    def describe_missing(self) -> str:
        return "no rewritable code here"

    def _covers(self, node: cst.CSTNode) -> bool:
        r = self.pos(node)
        return r.start.line <= (self.line or 0) <= r.end.line

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement:
        """The statement (simple line or compound) that contains ``node``."""
        current = node
        while not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            current = self.parent(current)
        return current

    def block_of(self, stmt: cst.BaseStatement) -> Sequence[cst.BaseStatement]:
        parent = self.parent(stmt)
        return parent.body if isinstance(parent, (cst.IndentedBlock, cst.Module)) else ()

    def enclosing(self, node: cst.CSTNode, kind: type[N]) -> N | None:
        for a in self.ancestors(node):
            if isinstance(a, kind):
                return a
        return None

    # -- code ---------------------------------------------------------------------------
    def code(self, node: cst.CSTNode) -> str:
        return self.tree.code_for_node(node)

    def warp_alias(self) -> str:
        """The name the module imports Warp as (``wp`` when it does not import it plainly)."""
        for node in self.nodes(self.tree, cst.Import):
            for alias in node.names:
                if dotted(alias.name) == "warp":
                    return alias.asname.name.value if alias.asname is not None else "warp"
        return "wp"

    def statement(self, source: str) -> cst.BaseStatement:
        return cst.parse_statement(source, config=self.tree.config_for_parsing)

    def expression(self, source: str) -> cst.BaseExpression:
        return cst.parse_expression(source, config=self.tree.config_for_parsing)

    def fresh_name(self, base: str, scope: cst.CSTNode | None = None) -> str:
        """``base``, or ``base2``, ``base3``... whichever no Name in ``scope`` (default: module) uses."""
        used = {n.value for n in self.nodes(scope or self.tree, cst.Name)}
        name, k = base, 2
        while name in used:
            name, k = f"{base}{k}", k + 1
        return name
