"""WF601: hoist a per-window tape out of the window (frame) loop.

The finding's span is the ``tape.backward(loss)`` call inside the window loop. The loop
body must hold, as direct statements: ``tape = wp.Tape()``, one ``with tape:`` block, the
backward, and optionally the per-window gradient handling (an accumulation of
``param.grad`` into a buffer, ``tape.zero()``). The rewrite:

* moves ``tape = wp.Tape()`` before the loop and wraps the whole loop in ``with tape:``;
  the window's ``with`` block is inlined into the loop body;
* keeps one loss array per window (the loop's allocation; a loss allocated once and
  zeroed with ``loss.zero_()`` in the loop gets ``loss = wp.zeros_like(loss)`` there) and
  adds each into a new ``<loss>_total`` array with a small kernel on the tape, in place of
  the backward; ``tape.backward(<loss>_total)`` follows the loop;
* deletes the cross-window gradient accumulation (``wp.launch(k, inputs=[G, p.grad])`` or
  ``G += p.grad.numpy()``), its ``G.zero_()`` and its allocation, and points every later
  reader of ``G`` (the optimizer) at ``p.grad`` (``p.grad.numpy()`` for a host buffer);
  ``tape.zero()`` moves after the last statement of the block that consumes the gradient.
  When ``G`` outlives the block (a parameter of the loop's function, other uses) the
  accumulation runs once after the backward instead, followed by ``tape.zero()``;
* gives each window its own copy of every scratch array a launch in the loop writes
  (``outputs=[ctrl]`` with ``ctrl`` allocated once before the loop);
* state lists (``states = [alloc for _ in range(K + 1)]``) carried by an alias or copy at
  the end of the window (``states[0] = states[-1]``, a swap of the two, or
  ``wp.copy(states[0]..., states[-1]...)``): the list grows to ``frames * K + 1`` distinct
  buffers, the alias goes, ``states[i]`` in the loop becomes ``states[frame * K + i]`` and
  a ``states`` passed whole to a helper becomes the window's slice
  ``states[frame * K:(frame + 1) * K + 1]`` (the helper is untouched). The list may be
  allocated in the function of the loop, at module level, or in another function of the
  same file that passes it to the loop's function under the same name;
* repeats, at the top of the training loop, the allocation of carried state the window
  loop rebinds when that allocation sits before the training loop (a fresh initial state
  every iteration).

Anything else is skipped with the reason (the finding keeps its manual recipe; see
``WF601_SHAPES.md``): a window loop that is not ``for <name> in range(<frames>)`` when a
state list must grow, ``break``/``continue``/``return`` in the window loop, a ``.grad``
read that is not a recognised accumulation, a loss neither allocated nor zeroed per
window, a state list allocated elsewhere or used in a way the index rewrite does not
cover, a scratch array updated in place, a gradient buffer read outside the loop's block.

The rewrite's memory cost (state buffers added, what the tape now keeps alive) is left in
``context.scratch["summary"]``.

Finding data (optional): ``loop`` (dict with ``line``: the window loop's first line),
``tape`` (the tape's name), ``loss`` (the loss's name), ``grad_reads`` and
``tape_zero_lines`` (lines of the per-window gradient reads and ``tape.zero()``, list or
comma-separated text; checked against the code), ``carried`` (labels of the carried
state: their root names get a fresh initial state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import libcst as cst

from codemods._base import call_name, dotted, keyword, positional, target_names
from codemods._hoist_state_lists import StateList, StateListHoist

_ALLOCATORS = ("zeros", "empty", "ones", "full", "zeros_like", "empty_like", "ones_like", "full_like", "clone", "array")
_LOOP_EXITS = (cst.Break, cst.Continue, cst.Return)


def _lines(value: Any) -> set[int]:
    if not value:
        return set()
    if isinstance(value, str):
        return {int(v) for v in value.replace(" ", "").split(",") if v}
    return {int(v) for v in value}


def _stem(place: str) -> str:
    """A local name for a place: ``loss`` for ``loss``, ``self.loss`` and ``losses[0]``'s ``losses``."""
    if place.isidentifier():
        return place
    words = [w for w in place.replace("[", ".").split(".") if w.isidentifier() and w != "self"]
    return words[-1] if words else "loss"


def _is_swap(assign: cst.Assign) -> bool:
    """``a, b = b, a`` between plain names."""
    if len(assign.targets) != 1:
        return False
    target, value = assign.targets[0].target, assign.value
    if not (isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == 2 == len(
        value.elements
    )):
        return False
    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in (*target.elements, *value.elements)]
    return None not in names and names[0] != names[1] and names[2:] == names[1::-1]


@dataclass
class _Accumulation:
    """``G`` accumulates ``param.grad`` across windows; readers of ``G`` read ``replacement`` instead."""

    buffer: str
    replacement: str
    stmt: cst.BaseStatement


class HoistWindowTape(StateListHoist):
    DESCRIPTION = "WF601: one tape around the whole window loop, one backward after it."
    RULES = ("WF601",)
    DATA = {
        "loop": "the window loop (dict with `line`)",
        "tape": "the tape's name",
        "loss": "the loss array's name",
        "grad_reads": "lines of the per-window reads of the parameters' .grad",
        "tape_zero_lines": "lines of the per-window tape.zero()",
        "carried": "the state carried from one window to the next (list, or comma-separated text)",
    }

    def describe_missing(self) -> str:
        return "no `tape.backward(loss)` call"

    # -- the plan -------------------------------------------------------------------------
    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, lambda c: call_name(c) == "backward" and isinstance(c.func, cst.Attribute))
        assert isinstance(call.func, cst.Attribute)
        bwd = self.statement_of(call)
        loop = self.enclosing(bwd, cst.For)
        if loop is None or self.parent(bwd) is not loop.body:
            raise self.not_applicable("the backward is not a statement of the window loop's body")
        wanted = self.data["loop"]
        if isinstance(wanted, dict) and wanted.get("line") and self.pos(loop).start.line != int(wanted["line"]):
            raise self.not_applicable(f"the window loop at line {wanted['line']} does not hold the backward")
        self._check_loop(loop)
        tape = self.code(call.func.value)
        if self.data["tape"] and self.data["tape"] != tape:
            raise self.not_applicable(f"the backward is on {tape}, not {self.data['tape']}")
        loss = self._loss_arg(call)
        body = list(loop.body.body)
        block = self.block_of(loop)
        scope = self.enclosing(loop, cst.FunctionDef) or self.tree

        creation = self._tape_creation(body, bwd, tape)
        with_stmt = self._with_block(body, bwd, tape)
        zeros = [s for s in body[body.index(with_stmt) + 1 :] if self._calls_method(s, tape, ("zero", "reset"))]
        expected_zero = _lines(self.data["tape_zero_lines"])
        if expected_zero - {self.pos(s).start.line for s in zeros}:
            raise self.not_applicable(f"tape.zero() at line(s) {sorted(expected_zero)} is not in the window loop")
        accumulations = self._accumulations(body, with_stmt, zeros, bwd)
        loss_alloc, loss_zeroings = self._loss_allocation(body, with_stmt, loss, loop, scope)
        states = self._state_lists(body, loop, scope)
        scratch = self._scratch_outputs(loop, scope, loss, states)
        carries = self._carries(body, with_stmt, loop, scope, scratch)
        initial = self._initial_state(loop, scope, states)
        frame, frames = self._frame_var(loop) if states else ("", "")
        self._check_frames_reachable(states, scope, frames)

        # the checks passed: register the edits (a NotApplicable raised below still discards them all)
        for st in states:
            self._grow_states(st, loop, frame, frames)
        for stmt in [creation, *zeros, *(a.stmt for a in accumulations)]:
            self.remove(stmt)
        self.replace(with_stmt, lambda new: cst.FlattenSentinel(list(new.body.body)))
        for stmt, code in carries:  # the next window starts from this window's own (fresh) buffers
            self.replace(stmt, self.statement(code).with_changes(leading_lines=stmt.leading_lines))
        for stmt in loss_zeroings:  # each window's loss in its own array, kept for the backward
            self.replace(stmt, self.statement(f"{loss} = {self.warp_alias()}.zeros_like({loss})\n").with_changes(
                leading_lines=stmt.leading_lines))
        total = self.fresh_name(f"{_stem(loss)}_total")
        kernel = self.fresh_name("accumulate_loss")
        self.replace(bwd, self.statement(
            f"{self.warp_alias()}.launch({kernel}, dim=1, inputs=[{loss}], outputs=[{total}])\n"
        ).with_changes(leading_lines=bwd.leading_lines))
        if scratch:
            self.insert_before(body[0], [s.with_changes(leading_lines=()) for s in scratch])
        self.replace(loop, lambda new: cst.With(
            items=[cst.WithItem(item=self.expression(tape))],
            body=cst.IndentedBlock(body=[new.with_changes(leading_lines=())]),
            leading_lines=new.leading_lines,
        ))
        # the kernel first: when the loop is module-level code, its definition goes above that code
        anchor = self._kernel_anchor(loop)
        kernel_def = self._kernel_def(kernel, loss_alloc)
        position = len(self._edit(anchor).before)
        self.insert_definitions(anchor, [kernel_def])
        if all(line.comment is None for line in anchor.leading_lines):  # blank lines only: PEP 8 spacing
            self._edit(anchor).before[position] = kernel_def.with_changes(leading_lines=[cst.EmptyLine()] * 2)
        if initial:
            outer, allocs = initial
            self.insert_before(outer.body.body[0], [a.with_changes(leading_lines=()) for a in allocs])
        self.insert_before(loop, [self._total_allocation(loss_alloc, total), creation.with_changes(leading_lines=())])
        self._retarget_consumers(block, loop, scope, accumulations, zeros, tape, total)
        self.context.scratch["summary"] = self._summary(states, frames)

    # -- checks -----------------------------------------------------------------------------
    def _check_loop(self, loop: cst.For) -> None:
        if loop.orelse is not None or not isinstance(loop.body, cst.IndentedBlock):
            raise self.not_applicable("the window loop has an else: block or a one-line body")
        inner = {id(n) for lp in self.nodes(loop.body, (cst.For, cst.While)) for n in self.nodes(lp.body, _LOOP_EXITS)
                 if not isinstance(n, cst.Return)}
        funcs = {id(n) for f in self.nodes(loop.body, (cst.FunctionDef, cst.Lambda)) for n in self.nodes(f, cst.Return)}
        for node in self.nodes(loop.body, _LOOP_EXITS):
            if id(node) not in inner and id(node) not in funcs:
                kind = type(node).__name__.lower()
                raise self.not_applicable(f"`{kind}` at line {self.pos(node).start.line} leaves the window loop early")

    def _loss_arg(self, call: cst.Call) -> str:
        """The loss as written: a name, or an attribute/subscript place (``self.loss``) without calls."""
        args = positional(call)
        arg = args[0] if args else keyword(call, "loss")
        if arg is None or not isinstance(arg.value, (cst.Name, cst.Attribute, cst.Subscript)) or len(call.args) != 1 or (
            self.nodes(arg.value, cst.Call)
        ):
            raise self.not_applicable("the backward is not `tape.backward(<loss name or attribute>)`")
        loss = self.code(arg.value)
        if self.data["loss"] and "".join(self.data["loss"].split()) != "".join(loss.split()):
            raise self.not_applicable(f"the backward's loss is {loss}, not {self.data['loss']}")
        return loss

    def _tape_creation(self, body: list[cst.BaseStatement], bwd: cst.BaseStatement, tape: str) -> cst.BaseStatement:
        for stmt in body[: body.index(bwd)]:
            assign = self._assign(stmt)
            if assign is not None and self.code(assign.targets[0].target) == tape:
                if call_name(assign.value) != "Tape":
                    raise self.not_applicable(f"{tape} is bound to something other than a new wp.Tape()")
                return stmt
        raise self.not_applicable(f"{tape} is not created in the window loop (reused tape)")

    def _with_block(self, body: list[cst.BaseStatement], bwd: cst.BaseStatement, tape: str) -> cst.With:
        blocks = [s for s in body if isinstance(s, cst.With) and any(self.code(i.item) == tape for i in s.items)]
        if len(blocks) != 1 or body.index(blocks[0]) > body.index(bwd):
            raise self.not_applicable(f"the window loop does not hold exactly one `with {tape}:` before the backward")
        block = blocks[0]
        if len(block.items) != 1 or block.items[0].asname is not None or not isinstance(block.body, cst.IndentedBlock):
            raise self.not_applicable(f"`with {tape}:` at line {self.pos(block).start.line} has other context items")
        return block

    def _accumulations(
        self, body: list[cst.BaseStatement], with_stmt: cst.With, zeros: list[cst.BaseStatement], bwd: cst.BaseStatement
    ) -> list[_Accumulation]:
        """The per-window gradient reads, each a recognised accumulation; any other .grad use skips."""
        expected = _lines(self.data["grad_reads"])
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

    def _loss_allocation(
        self, body: list[cst.BaseStatement], with_stmt: cst.With, loss: str, loop: cst.For, scope: cst.CSTNode
    ) -> tuple[cst.Call, list[cst.BaseStatement]]:
        """The loss's allocation call, and the ``loss.zero_()`` statements of the loop that must become fresh
        allocations (``loss = wp.zeros_like(loss)``) when the loss is allocated once outside the loop."""
        for stmt in [*body[: body.index(with_stmt)], *with_stmt.body.body]:
            assign = self._assign(stmt)
            if assign is not None and self.code(assign.targets[0].target) == loss:
                if call_name(assign.value) not in ("zeros", "empty"):
                    raise self.not_applicable(f"{loss} is not allocated with wp.zeros in the window loop")
                assert isinstance(assign.value, cst.Call)
                return assign.value, []
        zeroings = [s for s in body if self._calls_method(s, loss, ("zero_",))]
        inside = {id(a) for a in self.nodes(loop, cst.Assign)}
        if loss.isidentifier():
            allocs = [a for a in self._assignments(loss, scope, top=scope is self.tree) if id(a) not in inside]
            if not allocs and scope is not self.tree:
                allocs = self._assignments(loss, self.tree, top=True)
        else:  # `self.loss`: allocated once wherever the object is set up (`__init__`)
            allocs = [a for a in self.nodes(self.tree, cst.Assign) if id(a) not in inside and len(a.targets) == 1
                      and "".join(self.code(a.targets[0].target).split()) == "".join(loss.split())]
        if zeroings and len(allocs) == 1 and call_name(allocs[0].value) in ("zeros", "empty"):
            assert isinstance(allocs[0].value, cst.Call)
            return allocs[0].value, zeroings
        raise self.not_applicable(
            f"the loss {loss} is neither allocated in the window loop nor zeroed there with {loss}.zero_(): "
            "allocate it per window"
        )

    def _frame_var(self, loop: cst.For) -> tuple[str, str]:
        it = loop.iter
        if not (isinstance(loop.target, cst.Name) and isinstance(it, cst.Call) and call_name(it) == "range"
                and len(it.args) == 1 and it.args[0].keyword is None):
            raise self.not_applicable("the window loop is not `for <frame> in range(<frames>)`")
        return loop.target.value, self.code(it.args[0].value)

    def _scratch_outputs(
        self, loop: cst.For, scope: cst.CSTNode, loss: str, states: list[StateList]
    ) -> list[cst.BaseStatement]:
        """Allocations to repeat at the top of each window: arrays the loop's launches write (``outputs=``)
        that are allocated once outside the loop."""
        bound = {n for a in self.nodes(loop.body, cst.Assign) if not _is_swap(a)
                 for t in a.targets for n in target_names(t.target)}
        bound |= {n for f in self.nodes(loop.body, cst.For) for n in target_names(f.target)}
        skip = bound | {loss} | {s.name for s in states}
        out: list[cst.BaseStatement] = []
        seen: set[str] = set()
        for launch in self.nodes(loop.body, cst.Call):
            outputs = keyword(launch, "outputs") if call_name(launch) == "launch" else None
            if outputs is None or not isinstance(outputs.value, (cst.List, cst.Tuple)):
                continue
            inputs = keyword(launch, "inputs")
            read = {self.code(n) for n in self.nodes(inputs.value, cst.Name)} if inputs is not None else set()
            for element in outputs.value.elements:
                target = element.value
                if not isinstance(target, cst.Name) or target.value in skip or target.value in seen:
                    continue
                if target.value in read:
                    raise self.not_applicable(
                        f"the launch at line {self.pos(launch).start.line} updates {target.value} in place"
                    )
                allocs = [a for a in self._assignments(target.value, scope, top=scope is self.tree) if not _is_swap(a)]
                if not allocs and scope is not self.tree:
                    allocs = self._assignments(target.value, self.tree, top=True)
                if len(allocs) != 1 or call_name(allocs[0].value) not in _ALLOCATORS:
                    raise self.not_applicable(
                        f"{target.value}, written in every window (line {self.pos(launch).start.line}), is not "
                        "allocated once by one wp.zeros/empty call: allocate it per window"
                    )
                seen.add(target.value)
                out.append(self.statement_of(allocs[0]))
        return out

    def _carries(
        self, body: list[cst.BaseStatement], with_stmt: cst.With, loop: cst.For, scope: cst.CSTNode,
        scratch: list[cst.BaseStatement],
    ) -> list[tuple[cst.BaseStatement, str]]:
        """Window-to-window carries between the tape's buffers, outside the ``with`` block: each becomes a
        rebinding (statement, new code), and ``scratch`` gains the allocations the rebinding needs.

        ``wp.copy(dst, src)`` / ``dst.assign(src)`` with ``src`` fresh every window -> ``dst = src``;
        the ping-pong swap ``a, b = b, a`` -> ``a = b`` with ``b`` allocated at the top of every window.
        """
        fresh = {n for a in self.nodes(loop.body, cst.Assign) if not _is_swap(a)
                 for t in a.targets for n in target_names(t.target)}
        fresh |= {n for stmt in scratch for a in self.nodes(stmt, cst.Assign) for t in a.targets
                  for n in target_names(t.target)}
        rest = {id(n) for s in self.block_of(loop)[list(self.block_of(loop)).index(loop) + 1 :]
                for n in self.nodes(s, cst.Name)}
        out: list[tuple[cst.BaseStatement, str]] = []
        for stmt in body[body.index(with_stmt) + 1 :]:
            if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
                continue
            small = stmt.body[0]
            pair = self._copy_pair(small)
            if pair is not None:
                dst, src = pair
                root = dotted(src).split(".")[0]  # type: ignore[union-attr]
                if root not in fresh:
                    raise self.not_applicable(
                        f"line {self.pos(stmt).start.line} copies {self.code(src)} into {self.code(dst)} for the "
                        f"next window, but {root} is not allocated per window: allocate it in the window loop and "
                        f"rebind {self.code(dst)} = {self.code(src)}"
                    )
                self.check_rebindable(dst, stmt, f"line {self.pos(stmt).start.line}")
                out.append((stmt, f"{self.code(dst)} = {self.code(src)}\n"))
                continue
            if not isinstance(small, cst.Assign) or not _is_swap(small):
                continue
            a, b = (e.value.value for e in small.targets[0].target.elements)  # type: ignore[attr-defined]
            allocs = [x for x in self._assignments(b, scope, top=scope is self.tree)
                      if x not in self.nodes(loop, cst.Assign) and not _is_swap(x)]
            if len(allocs) != 1 or call_name(allocs[0].value) is None:
                raise self.not_applicable(
                    f"the swap at line {self.pos(stmt).start.line} carries {a} into the next window through {b}, "
                    f"which is not allocated once by one call: allocate {b} per window and rebind {a} = {b}"
                )
            if any(n.value == b and id(n) in rest for n in self.nodes(scope, cst.Name)):
                raise self.not_applicable(f"{b} is read after the window loop: the swap at line "
                                          f"{self.pos(stmt).start.line} cannot become a rebinding")
            if b not in fresh:
                scratch.append(self.statement_of(allocs[0]))
            out.append((stmt, f"{a} = {b}\n"))
        return out

    def _copy_pair(self, small: cst.BaseSmallStatement) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        """(dst, src) of ``wp.copy(dst, src)`` / ``dst.assign(src)`` between plain names or attributes."""
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return None
        call = small.value
        if call_name(call) == "copy" and len(call.args) == 2 == len(positional(call)):
            dst, src = call.args[0].value, call.args[1].value
        elif call_name(call) == "assign" and isinstance(call.func, cst.Attribute) and len(call.args) == 1:
            dst, src = call.func.value, call.args[0].value
        else:
            return None
        return (dst, src) if dotted(dst) is not None and dotted(src) is not None else None

    def _initial_state(
        self, loop: cst.For, scope: cst.CSTNode, states: list[StateList]
    ) -> tuple[cst.For | cst.While, list[cst.BaseStatement]] | None:
        """The training loop around the window loop and the allocations of carried state it must repeat so
        that every iteration starts from a fresh state: names the window loop rebinds whose only binding
        is one ``name = <call>`` before the training loop."""
        outer = next((a for a in self.ancestors(loop) if isinstance(a, (cst.For, cst.While, cst.FunctionDef))), None)
        if not isinstance(outer, (cst.For, cst.While)) or not isinstance(outer.body, cst.IndentedBlock):
            return None
        carried = self.data["carried"] or []
        if isinstance(carried, str):
            carried = carried.split(",")
        roots = {label.strip().split(".")[0].split("[")[0] for label in carried} - {s.name for s in states}
        rebound = {n for a in self.nodes(loop.body, cst.Assign) for t in a.targets for n in target_names(t.target)}
        inner = {id(a) for a in self.nodes(loop.body, cst.Assign)}
        in_outer = {n for a in self.nodes(outer.body, cst.Assign) if id(a) not in inner
                    for t in a.targets for n in target_names(t.target)}
        within = {id(a) for a in self.nodes(outer, cst.Assign)}
        allocs: list[cst.BaseStatement] = []
        for root in sorted(roots & rebound - in_outer):
            found = [a for a in self._assignments(root, scope, top=scope is self.tree) if id(a) not in within]
            if len(found) == 1 and isinstance(found[0].value, cst.Call):
                stmt = self.statement_of(found[0])
                if stmt not in allocs and self.enclosing(stmt, (cst.For, cst.While)) is self.enclosing(outer, (
                        cst.For, cst.While)):
                    allocs.append(stmt)
        return (outer, allocs) if allocs else None

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
        after = [self.statement(f"{tape}.backward({total})\n")]
        if not accumulations:
            if zeros:
                raise self.not_applicable(f"{tape}.zero() discards every window's gradient unread")
            self.insert_after(loop, after)
            return
        resets = self._removable_buffers(scope, accumulations, rest)
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

    def _total_allocation(self, loss_alloc: cst.Call, total: str) -> cst.BaseStatement:
        wp = self.warp_alias()
        extra = "".join(f", {k}={self.code(a.value)}" for k in ("dtype", "device")
                        if (a := keyword(loss_alloc, k)) is not None)
        return self.statement(f"{total} = {wp}.zeros(1{extra}, requires_grad=True)\n")

    def _kernel_def(self, kernel: str, loss_alloc: cst.Call) -> cst.BaseStatement:
        wp = self.warp_alias()
        dtype = keyword(loss_alloc, "dtype")
        dt = self.code(dtype.value) if dtype is not None else "float"
        source = (
            f"@{wp}.kernel\n"
            f"def {kernel}(term: {wp}.array(dtype={dt}), total: {wp}.array(dtype={dt})):\n"
            f'    """Add one window\'s loss to the episode loss, on the tape (warpfix WF601)."""\n'
            f"    {wp}.atomic_add(total, 0, term[0])\n"
        )
        return cst.parse_module(source, config=self.tree.config_for_parsing).body[0]

    def _summary(self, states: list[StateList], frames: str) -> str:
        parts = [
            f"state list {st.name}: {frames} * {st.steps} + 1 buffers instead of {st.steps} + 1, i.e. "
            f"({frames} - 1) * {st.steps} extra state buffers x the bytes of one `{self.code(st.alloc.value.elt)}`"
            for st in states
            if isinstance(st.alloc.value, cst.ListComp)
        ]
        parts.append("the tape keeps every window's intermediates alive until the backward; if the episode does "
                     "not fit, use gradient checkpointing (warp's example_fluid_checkpoint.py)")
        return "; ".join(parts)

    # -- helpers --------------------------------------------------------------------------------
    def _assign(self, stmt: cst.BaseStatement) -> cst.Assign | None:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
            assign = stmt.body[0]
            return assign if len(assign.targets) == 1 else None
        return None

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

    def _kernel_anchor(self, node: cst.CSTNode) -> cst.BaseStatement:
        """Where the loss kernel is defined: before the module-level function or class holding ``node``,
        else (module-level code) before the first statement after the module's imports."""
        stmt = self.statement_of(node)
        while not isinstance(self.parent(stmt), cst.Module):
            stmt = self.statement_of(self.parent(stmt))
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return stmt
        body = list(self.tree.body)
        imports = [i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine)
                   and isinstance(s.body[0], (cst.Import, cst.ImportFrom))]
        return body[imports[-1] + 1] if imports and imports[-1] + 1 < len(body) else stmt

