"""WF302 scope-hygiene: work after the loss inside `with tape:` (metrics, state resets, optimizer
steps, copies)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model import Project
from warpfix.model.facts import Buffer, Event, TapeScope, Trace, exclusive
from warpfix.model.grad_walk import early_read, walk_grads
from warpfix.model.tapeflow import (
    contains,
    describe_event,
    line_ref,
    outputs,
    tape_display_name,
    tape_of,
    true_reads,
)
from warpfix.rules._tape_scope_examples import KERNELS
from warpfix.rules.base import Example, Rule, RuleDoc

#: a statement of a tape block reading a gradient early: (index, the read, the gradient, the backward, the scope)
_EarlyRead = tuple[int, Event, Buffer, Event, TapeScope]


class ScopeHygiene(Rule):
    id = "WF302"
    name = "scope-hygiene"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "move the statement after `tape.backward(...)`"
    doc = RuleDoc(
        what=(
            "Flags work placed inside `with tape:` after the last op that writes the loss: metrics, "
            "optimizer steps, copies, state resets; and, anywhere in a `with tape:` block, a statement that "
            "reads a `.grad` this tape's next backward produces (an optimizer step moved into the tape, e.g. "
            "into the first of the blocks a tape is recorded in)."
        ),
        why=(
            "Everything inside the block is recorded and replayed backwards. Work after the loss adds "
            "write-after-read hazards against arrays the forward already consumed (an optimizer step "
            "overwrites the parameters the adjoints replay against) and inflates the backward pass."
        ),
        example="""
with tape:
    wp.launch(predict, dim=n, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=n, inputs=[y, target], outputs=[loss])
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])   # recorded, and runs before backward
tape.backward(loss)
""",
        use_instead="""
with tape:
    wp.launch(predict, dim=n, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
        fix=(
            "Safe: the moved work does not feed the loss, so forward values are unchanged. A step that reads "
            "a `.grad` early is moved only when no op between it and the backward reads what it writes "
            "(else the fix is unsafe: moving it would change what the loss sees)."
        ),
    )
    VALID = [
        Example(
            KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.reset()
""",
        ),
        Example(
            KERNELS
            + """
size = wp.zeros(1, dtype=float, requires_grad=True)
for it in range(20):
    loss.zero_()
    size.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
        wp.launch(mse, dim=32, inputs=[y, x], outputs=[size])
    tape.backward(loss)
    g_fit = w.grad.numpy().copy()
    tape.zero()
    tape.backward(size)
    g_size = w.grad.numpy().copy()
    w.assign(w.numpy() - 0.1 * (g_fit + g_size))
""",
            note="a second objective on the same tape, backwarded after `tape.zero()` (the fem cantilever's "
            "compliance and volume): the first backward replays it with a zero adjoint",
        ),
    ]
    INVALID = [
        Example(
            KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
        loss_host = wp.clone(loss, device="cpu")  # expect: WF302
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.reset()
""",
            expected_fix=KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    loss_host = wp.clone(loss, device="cpu")  # expect: WF302
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.reset()
""",
        ),
    ]

    _WORK = frozenset({"launch", "copy", "clone", "assign", "zero", "fill", "host_write"})

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        early = _early_read_sites(project, trace)
        yield from self._steps_on_tape(trace, early)
        events = trace.events
        for idx, bwd in enumerate(events):
            if bwd.kind != "backward" or bwd.tape is None or not bwd.reads:
                continue
            loss = bwd.reads[0].root()
            scope = next((e.tapes[-1] for e in reversed(events[:idx]) if tape_of(e) == bwd.tape), None)
            if scope is None:
                continue
            in_scope = [
                (j, e) for j, e in enumerate(events[:idx]) if e.recorded and e.tapes[-1] == scope
            ]
            writers = [j for j, e in in_scope if any(b.root().id == loss.id for b in outputs(e))]
            if not writers:
                continue
            loss_ev = events[writers[-1]]
            loss_site = _site_in(loss_ev, scope.span)
            seen = {(site.path, site.line) for site in early}  # reported as steps on the tape
            objectives = _other_objectives(events[writers[-1] + 1:idx], events[idx + 1:], bwd)
            for j, ev in in_scope:
                if j <= writers[-1] or ev.kind not in self._WORK or exclusive(ev, loss_ev) or id(ev) in objectives:
                    continue
                where = _site_in(ev, scope.span)
                if where is None or where == loss_site or (where.path, where.line) in seen:
                    continue
                seen.add((where.path, where.line))
                tape_name = str(bwd.detail.get("tape_name") or "tape")
                yield self.finding(
                    where,
                    f"{describe_event(ev)} runs inside `with {tape_name}:` after the loss `{bwd.name_of(loss)}` "
                    f"is computed ({line_ref(loss_ev.span, where)}): it is recorded and replayed by "
                    f"`{tape_name}.backward` ({line_ref(bwd.span, where)}); move it after the backward",
                    data={"tape": tape_name},
                    related=((loss_ev.span, "loss computed here"), (bwd.span, "backward here")),
                )

    def _steps_on_tape(self, trace: Trace, early: dict[Span, _EarlyRead]) -> Iterator[Finding]:
        """A statement inside ``with tape:`` that reads a ``.grad`` the tape's own next backward
        produces: an optimizer step (or a metric of the gradient) moved into the tape, wherever it
        sits in the block. It steps with the previous gradient (or zeros), and what it writes is
        recorded and replayed. The move is safe when nothing after it, before the backward, reads what
        it writes (at the first iteration the step is then invisible to the loss)."""
        events = trace.events
        for site, (idx, ev, grad, bwd, scope) in early.items():
            tape_name = tape_display_name(bwd)
            stop = events.index(bwd)
            written = {b.root().id for e in events[idx:stop] if _site_in(e, scope.span) == site
                       and e.kind in self._WORK for b in outputs(e)}
            feeds = next((e for e in events[idx:stop] if _site_in(e, scope.span) != site
                          and any(b.root().id in written for b in true_reads(e))), None)
            yield self.finding(
                site,
                f"`{ev.name_of(grad)}` is read inside `with {tape_name}:` ({line_ref(scope.span, site)}) before "
                f"`{tape_name}.backward` ({line_ref(bwd.span, site)}) produces it: an optimizer step on the tape "
                f"uses the previous gradient (or zeros), and its work is recorded and replayed by the backward; "
                f"move it after the backward"
                + (f" (not automatically: {describe_event(feeds)} at {line_ref(feeds.span, site)} reads what it "
                   f"writes)" if feeds is not None else ""),
                fix_safety=FixSafety.UNSAFE if feeds is not None else None,
                data={"tape": tape_name},
                related=((scope.span, "tape block"), (bwd.span, "backward here")),
            )


def _other_objectives(after_loss: list[Event], later: list[Event], bwd: Event) -> set[int]:
    """Events after the loss that only compute what a later backward of the same tape starts from (a
    second objective recorded on one tape, backwarded after a ``tape.zero()``): moving them after the
    first backward would take that objective off the tape, and the first backward replays them with
    zero adjoints. The ids of those events."""
    feeds = {e.reads[0].root().id for e in later if e.kind == "backward" and e.tape == bwd.tape and e.reads}
    out: set[int] = set()
    for ev in reversed(after_loss):
        written = {b.root().id for b in outputs(ev)}
        if written and written <= feeds:
            out.add(id(ev))
            feeds |= {b.root().id for b in true_reads(ev)}
    return out


def _site_in(ev: Event, block: Span) -> Span | None:
    """The statement of ``block`` (a with-statement span) through which ``ev`` runs."""
    for call in ev.call_stack:
        if contains(block, call):
            return call
    return ev.span if contains(block, ev.span) else None


def _early_read_sites(project: Project, trace: Trace) -> dict[Span, _EarlyRead]:
    """Statements of a ``with tape:`` block that read a ``.grad`` before that tape's next backward
    produces it: site -> (index, the read, the gradient, the backward, the block's scope)."""
    out: dict[Span, _EarlyRead] = {}
    for idx, ev, _states, pending in walk_grads(trace):
        if ev.kind != "grad_read" or not ev.recorded:
            continue
        src = project.files.get(ev.span.path)
        early = early_read(trace.events, idx, pending, src.statement_parents(ev.node)) if src is not None else None
        if early is None:
            continue
        grad, bwd = early
        scope = next((sc for sc in reversed(ev.tapes) if sc.tape == bwd.tape), None)
        site = _site_in(ev, scope.span) if scope is not None else None
        if scope is None or site is None or src is None:
            continue
        if site == ev.span:  # the read itself: report its statement
            stmt: ast.AST | None = ev.node
            while stmt is not None and not isinstance(stmt, ast.stmt):
                stmt = src.parents.get(id(stmt))
            site = src.span(stmt) if stmt is not None else site
        out.setdefault(site, (idx, ev, grad, bwd, scope))
    return out
