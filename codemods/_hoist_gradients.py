"""WF601 hoist: the per-window gradient accumulations of a window loop and their readers after it.

``wp.launch(k, inputs=[G, p.grad])`` or ``G += p.grad.numpy()`` after each window's backward sums
the windows' gradients into ``G``: found here (any other ``.grad`` read, an optimizer step inside
the window loop included, skips), removed, and every later reader of ``G`` pointed at ``p.grad``,
with ``tape.zero()`` after the last one; a ``G`` that outlives the block keeps one accumulation
after the single backward (:class:`GradientHoist`, a base of :class:`codemods.wf601_hoist.HoistWindowTape`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name, dotted, keyword, positional


def data_lines(value: Any) -> set[int]:
    """The line numbers of a finding's data value: a list, or comma-separated text."""
    if not value:
        return set()
    if isinstance(value, str):
        return {int(v) for v in value.replace(" ", "").split(",") if v}
    return {int(v) for v in value}


@dataclass
class _Accumulation:
    """``G`` accumulates ``param.grad`` across windows; readers of ``G`` read ``replacement`` instead."""

    buffer: str
    replacement: str
    stmt: cst.BaseStatement


class GradientHoist(FindingCommand):
    """Finding the per-window gradient accumulations and retargeting their readers after the loop."""

    # -- checks -----------------------------------------------------------------------------
    def _accumulations(
        self, body: list[cst.BaseStatement], with_stmt: cst.With, zeros: list[cst.BaseStatement], bwd: cst.BaseStatement
    ) -> list[_Accumulation]:
        """The per-window gradient reads, each a recognised accumulation; any other .grad use skips."""
        expected = data_lines(self.data["grad_reads"])
        found: list[_Accumulation] = []
        for stmt in body:
            if stmt is bwd or stmt in zeros:
                continue
            grads = [a for a in self.nodes(stmt, cst.Attribute) if a.attr.value == "grad"]
            if not grads:
                continue
            if stmt is with_stmt or body.index(stmt) < body.index(bwd):
                raise self.not_applicable(f"`.grad` is used at line {self.pos(grads[0]).start.line} before the backward")
            acc = self._accumulation(stmt, grads)
            if acc is None and self._steps_optimizer(stmt, grads):
                raise self.not_applicable(
                    f"the gradient feeds an optimizer step inside the window loop (line {self.pos(stmt).start.line}): "
                    "this is truncated training, and one backward per episode would change the forward of every "
                    "later window; no safe hoist (move the step after the window loop by hand if that is meant)"
                )
            if acc is None:
                raise self.not_applicable(
                    f"the gradient read at line {self.pos(stmt).start.line} is not an accumulation "
                    "`wp.launch(k, inputs=[G, p.grad])` or `G += p.grad.numpy()`"
                )
            found.append(acc)
        missing = expected - {self.pos(a.stmt).start.line for a in found}
        if missing:
            raise self.not_applicable(f"gradient read(s) at line(s) {sorted(missing)} are not in the window loop body")
        return found

    def _steps_optimizer(self, stmt: cst.BaseStatement, grads: list[cst.Attribute]) -> bool:
        """``wp.launch(step, inputs=[p, p.grad, ...])``: a launch updating ``p`` from its own gradient."""
        launches = [c for c in self.nodes(stmt, cst.Call) if call_name(c) == "launch"]
        for launch in launches:
            bound = [keyword(launch, "inputs"), keyword(launch, "outputs"), *positional(launch)[2:4]]
            args = {self.code(e.value) for b in bound if b is not None and isinstance(b.value, (cst.List, cst.Tuple))
                    for e in b.value.elements}
            if any(self.code(g.value) in args for g in grads if g in self.nodes(launch, cst.Attribute)):
                return True
        return False

    def _accumulation(self, stmt: cst.BaseStatement, grads: list[cst.Attribute]) -> _Accumulation | None:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or len(grads) != 1:
            return None
        small, grad = stmt.body[0], grads[0]
        if dotted(grad) is None:
            return None
        if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
            value = small.value
            if isinstance(small.target, cst.Name) and call_name(value) == "numpy" and isinstance(value, cst.Call) and (
                isinstance(value.func, cst.Attribute) and value.func.value is grad and not value.args
            ):
                return _Accumulation(small.target.value, f"{self.code(grad)}.numpy()", stmt)
            return None
        if not (isinstance(small, cst.Expr) and call_name(small.value) == "launch"):
            return None
        launch = small.value
        assert isinstance(launch, cst.Call)
        inputs = keyword(launch, "inputs")
        names = [e.value for e in inputs.value.elements] if inputs is not None and isinstance(
            inputs.value, (cst.List, cst.Tuple)) else []
        if len(names) != 2 or grad not in names or keyword(launch, "outputs") is not None:
            return None
        other = names[0] if names[1] is grad else names[1]
        if not isinstance(other, cst.Name):
            return None
        return _Accumulation(other.value, self.code(grad), stmt)

    # -- edits --------------------------------------------------------------------------------

    def _retarget_consumers(
        self,
        block: Sequence[cst.BaseStatement],
        loop: cst.For,
        scope: cst.CSTNode,
        accumulations: list[_Accumulation],
        zeros: list[cst.BaseStatement],
        tape: str,
        total: str,
    ) -> None:
        """Point readers of the accumulation buffers at ``p.grad`` and zero the tape after the last one;
        when a buffer outlives the block (a parameter, other uses), accumulate once after the backward."""
        rest = list(block[list(block).index(loop) + 1 :])
        seed = getattr(self, "seed", None)
        call = f"grads={{{total}: {seed}}}" if seed is not None else total
        after = [self.statement(f"{tape}.backward({call})\n")]
        if not accumulations:
            if zeros:
                raise self.not_applicable(f"{tape}.zero() discards every window's gradient unread")
            self.insert_after(loop, after)
            return
        # the windows' sum written back into ``p.grad`` for code after the block (``p.grad.assign(G)``): the sum
        # stays, taken once after the backward, and the tape is cleared before the write-back as each window did
        writes_back = any(_gradient_written(call, self.code) is not None
                          and any(n.value in {a.buffer for a in accumulations} for n in self.nodes(call, cst.Name))
                          for stmt in rest for call in self.nodes(stmt, cst.Call))
        resets = None if writes_back else self._removable_buffers(scope, accumulations, rest)
        if resets is None:
            after += [a.stmt.with_changes(leading_lines=()) for a in accumulations]
            if zeros:
                after.append(self.statement(f"{tape}.zero()\n"))
            self.insert_after(loop, after)
            return
        replacement = {a.buffer: a.replacement for a in accumulations}
        grads = {a.replacement.removesuffix(".numpy()") for a in accumulations}
        last = None
        for stmt in rest:
            names = [n for n in self.nodes(stmt, cst.Name) if n.value in replacement]
            for n in names:
                self.replace(n, self.expression(replacement[n.value]))
            if names or any(self.code(a) in grads for a in self.nodes(stmt, cst.Attribute)):
                last = stmt
        for stmt in resets:
            self.remove(stmt)
        if last is None:
            raise self.not_applicable("no statement after the window loop consumes the gradient")
        if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return):
            # the gradient is handed to the caller, which consumes it after the return: the buffers the
            # windows summed into started at zero each call, so the gradients do now, before the backward
            after = [*(self.statement(f"{g}.zero_()\n") for g in sorted(grads)), *after]
        elif not any(self._calls_method(s, tape, ("zero", "reset")) for s in rest):
            self.insert_after(last, [self.statement(f"{tape}.zero()\n")])
        self.insert_after(loop, after)

    def _removable_buffers(
        self, scope: cst.CSTNode, accumulations: list[_Accumulation], rest: list[cst.BaseStatement]
    ) -> list[cst.BaseStatement] | None:
        """The resets/allocations of the accumulation buffers when every other use of them is a read in
        ``rest`` (then the buffers can go), else None."""
        if isinstance(scope, cst.FunctionDef) and {a.buffer for a in accumulations} & {
            p.name.value for p in scope.params.params
        }:
            return None
        inside = {id(n) for s in [*rest, *(a.stmt for a in accumulations)] for n in self.nodes(s, cst.Name)}
        resets: list[cst.BaseStatement] = []
        for a in accumulations:
            for node in self.nodes(scope, cst.Name):
                if node.value != a.buffer:
                    continue
                stmt = self.statement_of(node)
                if id(node) in inside:
                    if isinstance(self.parent(node), cst.AssignTarget):
                        return None
                elif self._is_reset(stmt, a.buffer):
                    if stmt not in resets:
                        resets.append(stmt)
                else:
                    return None
        if not any(n.value in {a.buffer for a in accumulations} for s in rest for n in self.nodes(s, cst.Name)):
            return None
        return resets

    def _is_reset(self, stmt: cst.BaseStatement, buffer: str) -> bool:
        """``G.zero_()``, ``G.fill_(0...)``, ``G[:] = 0`` or the allocation ``G = <call>``."""
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return False
        small = stmt.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and isinstance(
            small.value.func, cst.Attribute
        ):
            return self.code(small.value.func.value) == buffer and small.value.func.attr.value in ("zero_", "fill_")
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(target, cst.Name) and target.value == buffer:
                return isinstance(small.value, cst.Call)
            return self.code(target) == f"{buffer}[:]"
        return False

    # -- helpers --------------------------------------------------------------------------------
    def _calls_method(self, stmt: cst.BaseStatement, obj: str, methods: tuple[str, ...]) -> bool:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return False
        small = stmt.body[0]
        return (
            isinstance(small, cst.Expr)
            and isinstance(small.value, cst.Call)
            and isinstance(small.value.func, cst.Attribute)
            and small.value.func.attr.value in methods
            and self.code(small.value.func.value) == obj
        )


def _gradient_written(call: cst.Call, code: Callable[[cst.CSTNode], str]) -> str | None:
    """``p.grad`` when ``call`` overwrites it (``p.grad.assign(...)``, ``wp.copy(p.grad, ...)``); else None."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "assign" and code(func.value).endswith(".grad"):
        return code(func.value)
    if call_name(call) == "copy" and call.args and code(call.args[0].value).endswith(".grad"):
        return code(call.args[0].value)
    return None
