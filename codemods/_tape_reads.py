"""WF301 tape zero: where a tape is recorded, zeroed or reset, and where its gradients are last read.

The calls ``<tape>.zero()`` / ``<tape>.reset()`` in a statement, whether a ``with`` block records the
tape, calls of a method on ``self``, and the last statement of a block that reads a gradient after the
backward (inside the one ``if`` arm that consumes it, for checkpoint segments): the queries every
strategy of the codemod places its edit by (:class:`TapeReads`, a base of
:class:`codemods.wf301_tape_zero.ZeroTape`).
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name
from warpfix.model.grad_reads import cst_grad_locals, cst_reads_grad


class TapeReads(FindingCommand):
    """Finding a tape's recordings, zeroes and resets, and the last read of its gradients."""

    def _last_consumer(self, anchor: cst.BaseStatement, scope: cst.IndentedBlock | cst.Module,
                       names: set[str] | None = None) -> tuple[cst.BaseStatement, bool] | None:
        """The last statement of ``scope`` after ``anchor`` that reads a gradient (or one of ``names``), and
        whether it lies inside an ``if`` arm: when that ``if`` is the only reader of its block and only one
        of its arms reads, the gradient is consumed in that arm (a checkpoint segment that hands its
        gradients on to the next one), and that is where it is done with."""
        names = set(names or ()) | cst_grad_locals(scope.body)
        found = None
        stmt: cst.CSTNode = anchor
        while True:
            block = self.block_of(stmt) if isinstance(stmt, cst.BaseStatement) else ()
            if stmt in block:
                # a `return` of the gradient hands it to the caller: no use here (zero at the caller)
                readers = [s for s in block[list(block).index(stmt) + 1:]
                           if cst_reads_grad(s, names) and not self.nodes(s, cst.Return)]
                if readers:
                    found = (readers[-1], len(readers) == 1)
                if block is scope.body:
                    break
            if isinstance(stmt, cst.Module):
                break
            stmt = self.parent(stmt)
        if found is None:
            return None
        where, alone = found
        in_arm = False
        while alone and isinstance(where, cst.If) and not cst_reads_grad(where.test, names):
            arms = [where.body]
            orelse = where.orelse
            while orelse is not None:
                arms.append(orelse.body)
                orelse = orelse.orelse if isinstance(orelse, cst.If) else None
            reading = [a for a in arms if cst_reads_grad(a, names)]
            if len(reading) != 1 or not isinstance(reading[0], cst.IndentedBlock):
                break
            inner = [s for s in reading[0].body if cst_reads_grad(s, names)]
            where, alone, in_arm = inner[-1], len(inner) == 1, True
        return where, in_arm

    def _is_self_call(self, call: cst.Call, name: str) -> bool:
        f = call.func
        return isinstance(f, cst.Attribute) and f.attr.value == name and self.code(f.value) == "self"

    # -- helpers ----------------------------------------------------------------------------
    def summary(self, text: str) -> None:
        self.context.scratch["summary"] = text

    def _calls(self, stmt: cst.CSTNode, tape: str, methods: tuple[str, ...]) -> list[cst.Call]:
        return [
            c for c in self.nodes(stmt, cst.Call)
            if call_name(c) in methods and isinstance(c.func, cst.Attribute) and self.code(c.func.value) == tape
        ]

    def _records(self, stmt: cst.With, tape: str) -> bool:
        for item in stmt.items:
            if self.code(item.item) == tape:
                return True
            if item.asname is not None and self.code(item.asname.name) == tape:
                return False  # `with wp.Tape() as tape:` makes a fresh tape: nothing old to replay
        return False
