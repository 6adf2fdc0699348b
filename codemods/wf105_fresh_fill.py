"""WF105: ``x.zero_()`` / ``x.fill_(v)`` on an array the tape already read.

The overwrite tracker does not see these writes, and the earlier reader's adjoint
replays against the new contents. Strategies, tried in this order (the applied one is
named in the report):

* **fresh array**: ``x = wp.zeros_like(x)`` / ``x = wp.full_like(x, v)`` (both inherit
  ``requires_grad``); skipped when ``x`` cannot be rebound (see WF101), in particular in
  code a graph capture runs (:mod:`warpfix.model.capture`);
* **snapshot the read**: each recorded reader of ``x`` since its last recorded write reads a
  copy instead, ``wp.launch(k, inputs=[wp.clone(x), ...])``, and the reset stays. The copy is
  recorded, so the gradient still reaches ``x``; the forward reads the same values; under a
  capture the copy is a graph-owned temporary that the tape keeps alive. Nothing is rebound.
  Offered by the rule only when it is exact (:mod:`warpfix.model.reset_era`): every reader is
  a launch of the project's own code and nothing on the tape touches ``x`` after the reset.
* **delete a dead reset**: where the method resets ``self.x`` again on every call before it uses
  it, and nothing else in the project uses ``x`` (:mod:`warpfix.model.dead_reset`), nothing but
  the backward sees what the reset writes: the statement goes.

Finding data: ``snapshot`` -- ``[path, line of the launch, argument text]`` of each reader
(a list, or its JSON text), or ``snapshot_refused`` -- why the rule could not offer it; then
``dead_after`` -- the line of the covering reset, or ``dead_refused`` -- why the reset is not dead.
The span's line holds the ``zero_``/``fill_`` statement.
"""

from __future__ import annotations

import ast
import json

import libcst as cst

from codemods._base import FindingCommand, NotApplicable
from codemods._cst import call_name, keyword, positional
from codemods._resolve import same_file


def _is_reset(call: cst.Call) -> bool:
    name = call_name(call)
    return isinstance(call.func, cst.Attribute) and (
        (name == "zero_" and not call.args) or (name == "fill_" and len(call.args) == 1)
    )


def _normal(code: str) -> str:
    try:
        return ast.unparse(ast.parse(code.strip(), mode="eval"))
    except SyntaxError:
        return code.strip()


class FreshFill(FindingCommand):
    DESCRIPTION = "WF105: allocate a fresh array instead of zero_()/fill_() on an array the tape read."
    RULES = ("WF105",)
    DATA = {
        "snapshot": "[path, launch line, argument text] of each reader that may read a copy instead",
        "snapshot_refused": "why the readers cannot read a copy instead",
        "dead_after": "line of the reset that makes this one dead",
        "dead_refused": "why the reset is not dead",
    }

    def describe_missing(self) -> str:
        return "no `x.zero_()` / `x.fill_(v)` statement"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, _is_reset)
        expr, line = self.parent(call), self.parent(self.parent(call))
        if not (isinstance(expr, cst.Expr) and isinstance(line, cst.SimpleStatementLine)):
            raise self.not_applicable("the reset is not a statement of its own")
        assert isinstance(call.func, cst.Attribute)
        target = call.func.value
        if isinstance(target, cst.Attribute) and target.attr.value == "grad":
            raise self.not_applicable("resetting a .grad is not a recorded write")
        try:
            self.check_rebindable(target, line, through_return=True)
        except NotApplicable as refused:
            self._edits = {}
            try:
                self._snapshot(str(refused))
            except NotApplicable as no_snapshot:
                self._edits = {}
                self._delete_dead(line, str(no_snapshot))
            return
        alias = self.warp_alias()
        text = self.code(target)
        if call_name(call) == "zero_":
            value = f"{alias}.zeros_like({text})"
        else:
            value = f"{alias}.full_like({text}, {self.code(call.args[0].value)})"
        self.replace(
            expr,
            cst.Assign(targets=[cst.AssignTarget(target)], value=self.expression(value), semicolon=expr.semicolon),
        )

    def _snapshot(self, refused: str) -> None:
        """Each reader's argument becomes ``wp.clone(<argument>)``; all or nothing."""
        sites = self.data["snapshot"]
        if isinstance(sites, str):
            sites = json.loads(sites)
        if not sites:
            why = self.data["snapshot_refused"] or "the finding names no reader"
            raise NotApplicable(f"{refused}; reading a snapshot instead does not apply: {why}")
        clone = self.expression(f"{self.warp_alias()}.clone")
        lines = []
        for path, line, text in sites:
            where = f"the reader at {path}:{line}"
            if not same_file(self.context.filename, str(path)):
                raise NotApplicable(f"{refused}; no snapshot either: {where} is in another file")
            args = self._reader_args(int(line), str(text), where, refused)
            for arg in args:
                self.replace(arg, lambda new: cst.Call(func=clone, args=[cst.Arg(new)]))
            lines.append(str(line))
        self.context.scratch["summary"] = (
            f"snapshot the read: the launch(es) at line(s) {', '.join(lines)} read `wp.clone(...)` of the array "
            "instead, and the reset stays"
        )

    def _delete_dead(self, line: cst.SimpleStatementLine, refused: str) -> None:
        covering = self.data["dead_after"]
        if not covering:
            why = self.data["dead_refused"] or "the finding does not say"
            raise NotApplicable(f"{refused}; deleting the reset does not apply: {why}")
        if len(line.body) != 1:
            raise NotApplicable(f"{refused}; deleting the reset does not apply: it shares its line")
        self.remove(line)
        self.context.scratch["summary"] = (
            f"delete the dead reset: the reset at line {int(covering)} overwrites the array before anything else "
            "reads it, so only the backward saw what this one wrote"
        )

    def _reader_args(self, line: int, text: str, where: str, refused: str) -> list[cst.BaseExpression]:
        """The elements of the ``inputs`` list of the launch starting at ``line`` that are ``text``."""
        launches = [c for c in self.nodes(self.tree, cst.Call)
                    if call_name(c) == "launch" and self.pos(c).start.line == line]
        if len(launches) != 1:
            raise NotApplicable(f"{refused}; no snapshot either: no single `wp.launch` at {where}")
        launch = launches[0]
        inputs = keyword(launch, "inputs")
        plain = positional(launch)
        value = inputs.value if inputs is not None else plain[2].value if len(plain) > 2 else None
        if not isinstance(value, (cst.List, cst.Tuple)):
            raise NotApplicable(f"{refused}; no snapshot either: {where} does not pass `inputs` as a list")
        args = [e.value for e in value.elements
                if isinstance(e, cst.Element) and _normal(self.code(e.value)) == _normal(text)]
        if not args:
            raise NotApplicable(f"{refused}; no snapshot either: `{text}` is not among the `inputs` of {where}")
        return args
