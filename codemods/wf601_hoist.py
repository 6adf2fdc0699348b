"""WF601: hoist a per-window tape out of the window (frame) loop.

The finding's span is the ``tape.backward(loss)`` call inside the window loop. The loop
body must hold, as direct statements: ``tape = wp.Tape()`` and one ``with tape:`` block (or
one ``with wp.Tape() as tape:`` block, ``tape`` a name or an attribute such as ``self.tape``),
the backward, and optionally the per-window gradient handling (an accumulation of
``param.grad`` into a buffer, ``tape.zero()``). The rewrite:

* moves ``tape = wp.Tape()`` before the loop (a ``with wp.Tape() as tape:`` becomes that
  statement) and wraps the whole loop in ``with tape:``; the window's ``with`` block is
  inlined into the loop body;
* keeps one loss array per window (the loop's allocation; a loss allocated once and
  zeroed with ``loss.zero_()`` in the loop gets ``loss = wp.zeros_like(loss)`` there) and
  adds each into a new ``<loss>_total`` array with a small kernel on the tape, in place of
  the backward; ``tape.backward(<loss>_total)`` follows the loop;
* a loss the windows share instead (neither allocated nor zeroed in the loop: zeroed once
  before it, or made once by the class) that every launch of every window only adds into
  (``wp.atomic_add``, ``+=``; checked down through the project's functions and methods,
  ``codemods/_hoist_loss.py``) already holds the episode objective: the per-window backward
  goes and ``tape.backward(loss)`` follows the loop, nothing else about the loss changes;
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
window that some window overwrites, resets, rebinds or hands to code outside the project (the
reason names the place), a state list allocated elsewhere or used in a way the index rewrite does not
cover, a scratch array updated in place, a gradient buffer read outside the loop's block.

The rewrite's memory cost (state buffers added, what the tape now keeps alive) is left in
``context.scratch["summary"]``.

Finding data (optional): ``loop`` (dict with ``line``: the window loop's first line),
``tape`` (the tape's name), ``loss`` (the loss's name), ``grad_reads`` and
``tape_zero_lines`` (lines of the per-window gradient reads and ``tape.zero()``, list or
comma-separated text; checked against the code), ``carried`` (labels of the carried
state: their root names get a fresh initial state).

The analysis lives in three bases of :class:`HoistWindowTape`: the gradient accumulations
and their readers in ``codemods/_hoist_gradients.py``, the scratch arrays, carries and
initial state in ``codemods/_hoist_carries.py``, the state lists in
``codemods/_hoist_state_lists.py``.
"""

from __future__ import annotations

import libcst as cst

from codemods._cst import call_name, keyword, positional
from codemods._hoist_carries import CarryHoist
from codemods._hoist_gradients import GradientHoist, data_lines
from codemods._hoist_loss import LossRefusal, LossWalk
from codemods._hoist_running_total import running_total
from codemods._hoist_state_lists import StateList
from codemods._hoist_tape_forms import context_made_tape, seeded_loss

_LOOP_EXITS = (cst.Break, cst.Continue, cst.Return)


def _stem(place: str) -> str:
    """A local name for a place: ``loss`` for ``loss``, ``self.loss`` and ``losses[0]``'s ``losses``."""
    if place.isidentifier():
        return place
    words = [w for w in place.replace("[", ".").split(".") if w.isidentifier() and w != "self"]
    return words[-1] if words else "loss"


class HoistWindowTape(GradientHoist, CarryHoist):
    loss_adds: list[str]  # the launches that add into a loss the windows share (the accumulated-loss shape)

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
        self.seed: str | None = None  # ``grads={loss: seed}``
        self.context_item: cst.WithItem | None = None  # ``with recording() as tape:``
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

        creation, made = self._tape_creation(body, bwd, tape)
        with_stmt = self._with_block(body, bwd, tape)
        zeros = [s for s in body[body.index(with_stmt) + 1 :] if self._calls_method(s, tape, ("zero", "reset"))]
        expected_zero = data_lines(self.data["tape_zero_lines"])
        if expected_zero - {self.pos(s).start.line for s in zeros}:
            raise self.not_applicable(f"tape.zero() at line(s) {sorted(expected_zero)} is not in the window loop")
        accumulations = self._accumulations(body, with_stmt, zeros, bwd)
        window_loss = loss
        loss = running_total(self, body, with_stmt, loop, loss) or loss
        loss_alloc, loss_zeroings = self._loss_allocation(body, with_stmt, loss, loop, scope)
        if self.seed is not None and loss_alloc is not None:
            raise self.not_applicable(f"the backward seeds {loss}, which each window allocates anew: no one array "
                                      "holds every window's terms to seed")
        states = self._state_lists(body, loop, scope)
        scratch = self._scratch_outputs(loop, scope, loss, states)
        carries = self._carries(body, with_stmt, loop, scope, scratch)
        initial = self._initial_state(loop, scope, states)
        frame, frames = self._frame_var(loop) if states else ("", "")
        self._check_frames_reachable(states, scope, frames)

        # the checks passed: register the edits (a NotApplicable raised below still discards them all)
        for st in states:
            self._grow_states(st, loop, frame, frames)
        for stmt in [*([creation] if creation is not None else []), *zeros, *(a.stmt for a in accumulations)]:
            self.remove(stmt)
        self.replace(with_stmt, lambda new: cst.FlattenSentinel(list(new.body.body)))
        for stmt, code in carries:  # the next window starts from this window's own (fresh) buffers
            self.replace(stmt, self.statement(code).with_changes(leading_lines=stmt.leading_lines))
        for stmt in loss_zeroings:  # each window's loss in its own array, kept for the backward
            self.replace(stmt, self.statement(f"{loss} = {self.warp_alias()}.zeros_like({loss})\n").with_changes(
                leading_lines=stmt.leading_lines))
        if loss_alloc is None:  # every window adds into the one loss: it is the episode's, backward it
            self.remove(bwd)
            total = loss
        else:
            total = self.fresh_name(f"{_stem(loss)}_total")
            kernel = self.fresh_name("accumulate_loss")
            self.replace(bwd, self.statement(
                f"{self.warp_alias()}.launch({kernel}, dim=1, inputs=[{loss}], outputs=[{total}])\n"
            ).with_changes(leading_lines=bwd.leading_lines))
        if scratch:
            self.insert_before(body[0], [s.with_changes(leading_lines=()) for s in scratch])
        item = self.context_item or cst.WithItem(item=self.expression(tape))
        self.replace(loop, lambda new: cst.With(
            items=[item.with_changes(comma=cst.MaybeSentinel.DEFAULT)],
            body=cst.IndentedBlock(body=[new.with_changes(leading_lines=())]),
            leading_lines=new.leading_lines,
        ))
        if loss_alloc is not None:
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
        made_stmt = creation.with_changes(leading_lines=()) if creation is not None else (
            self.statement(made) if made else None)
        self.insert_before(loop, [
            *([self._total_allocation(loss_alloc, total)] if loss_alloc is not None else []),
            *([made_stmt] if made_stmt is not None else []),
        ])
        self._retarget_consumers(block, loop, scope, accumulations, zeros, tape, total)
        summary = self._summary(states, frames, None if loss_alloc is not None else loss)
        if loss != window_loss:
            summary = f"each window's {window_loss} is added into {loss} on the tape; {summary}"
        self.context.scratch["summary"] = summary

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
        """The loss as written: a name, or an attribute/subscript place (``self.loss``) without calls; the seeded
        array of ``tape.backward(grads={array: seed})`` (:mod:`codemods._hoist_tape_forms`)."""
        seeded = seeded_loss(self, call)
        if seeded is not None:
            self.seed = seeded[1]
            return seeded[0]
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

    def _tape_creation(
        self, body: list[cst.BaseStatement], bwd: cst.BaseStatement, tape: str
    ) -> tuple[cst.BaseStatement | None, str]:
        """The window's ``tape = wp.Tape()`` (deleted by the hoist) and its code; ``(None, code)`` when the
        window's ``with wp.Tape() as tape:`` makes it (the block is inlined, the creation made a statement)."""
        for stmt in body[: body.index(bwd)]:
            assign = self._assign(stmt)
            if assign is not None and self.code(assign.targets[0].target) == tape:
                if call_name(assign.value) != "Tape":
                    raise self.not_applicable(f"{tape} is bound to something other than a new wp.Tape()")
                return stmt, self.code(stmt)
            if isinstance(stmt, cst.With) and any(
                i.asname is not None and self.code(i.asname.name) == tape for i in stmt.items
            ):
                item = stmt.items[0]
                if len(stmt.items) == 1 and context_made_tape(self, item):
                    self.context_item = item  # the hoisted loop runs in one such block
                    return None, ""
                if len(stmt.items) != 1 or call_name(item.item) != "Tape":
                    raise self.not_applicable(
                        f"`with ... as {tape}:` at line {self.pos(stmt).start.line} binds {tape} to something other "
                        "than a new wp.Tape()"
                    )
                return None, f"{tape} = {self.code(item.item)}\n"
        raise self.not_applicable(f"{tape} is not created in the window loop (reused tape)")

    def _with_block(self, body: list[cst.BaseStatement], bwd: cst.BaseStatement, tape: str) -> cst.With:
        blocks = [s for s in body if isinstance(s, cst.With) and any(
            self.code(i.item) == tape or i.asname is not None and self.code(i.asname.name) == tape for i in s.items
        )]
        if len(blocks) != 1 or body.index(blocks[0]) > body.index(bwd):
            raise self.not_applicable(f"the window loop does not hold exactly one `with {tape}:` before the backward")
        block = blocks[0]
        made = block.items[0].asname is not None and self.code(block.items[0].asname.name) == tape
        if len(block.items) != 1 or block.items[0].asname is not None and not made or not isinstance(
            block.body, cst.IndentedBlock
        ):
            raise self.not_applicable(f"`with {tape}:` at line {self.pos(block).start.line} has other context items")
        return block

    def _loss_allocation(
        self, body: list[cst.BaseStatement], with_stmt: cst.With, loss: str, loop: cst.For, scope: cst.CSTNode
    ) -> tuple[cst.Call | None, list[cst.BaseStatement]]:
        """The loss's allocation call, and the ``loss.zero_()`` statements of the loop that must become fresh
        allocations (``loss = wp.zeros_like(loss)``) when the loss is allocated once outside the loop.
        ``(None, [])`` when the loop neither allocates nor zeroes the loss and every window only adds into
        it (:mod:`codemods._hoist_loss`): it then holds the episode objective, and is backwarded as it is."""
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
        if zeroings:
            raise self.not_applicable(
                f"the loss {loss} is zeroed in the window loop but not allocated once by one wp.zeros call "
                f"({len(allocs)} allocation(s) in this file): allocate it per window"
            )
        filename = self.context.filename or "<module>"
        walk = LossWalk({**(self.context.scratch.get("sources") or {}), filename: self.tree.code})
        try:
            walk.check(filename, self.pos(loop).start.line, loss)
        except LossRefusal as why:
            raise self.not_applicable(
                f"the loss {loss} is neither allocated in the window loop nor zeroed there with {loss}.zero_(), "
                f"so every window must only add into it, but {why}: allocate it per window"
            ) from None
        self.loss_adds = walk.adds
        return None, []

    def _frame_var(self, loop: cst.For) -> tuple[str, str]:
        it = loop.iter
        if not (isinstance(loop.target, cst.Name) and isinstance(it, cst.Call) and call_name(it) == "range"
                and len(it.args) == 1 and it.args[0].keyword is None):
            raise self.not_applicable("the window loop is not `for <frame> in range(<frames>)`")
        return loop.target.value, self.code(it.args[0].value)

    # -- edits --------------------------------------------------------------------------------
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

    def _summary(self, states: list[StateList], frames: str, added: str | None) -> str:
        parts = [
            f"the loss {added} sums every window's terms ({', '.join(self.loss_adds)} add into it): its one "
            "backward after the loop is the episode's"
        ] if added else []
        parts += [
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
