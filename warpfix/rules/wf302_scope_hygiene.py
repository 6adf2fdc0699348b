"""WF302 scope-hygiene: work after the loss inside `with tape:` (metrics, state resets, optimizer
steps, copies)."""

from __future__ import annotations

from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model import Project
from warpfix.model.facts import Event, exclusive
from warpfix.model.tapeflow import contains, describe_event, line_ref, outputs, tape_of
from warpfix.rules._tape_scope_examples import KERNELS
from warpfix.rules.base import Example, Rule, RuleDoc


class ScopeHygiene(Rule):
    id = "WF302"
    name = "scope-hygiene"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "move the statement after `tape.backward(...)`"
    doc = RuleDoc(
        what=(
            "Flags work placed inside `with tape:` after the last op that writes the loss: metrics, "
            "optimizer steps, copies, state resets."
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
        fix="Safe: the moved work does not feed the loss, so forward values are unchanged.",
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

    def check(self, project: Project) -> Iterator[Finding]:
        for trace in project.traces:
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
                seen: set[Span] = set()
                for j, ev in in_scope:
                    if j <= writers[-1] or ev.kind not in self._WORK or exclusive(ev, loss_ev):
                        continue
                    where = _site_in(ev, scope.span)
                    if where is None or where == loss_site or where in seen:
                        continue
                    seen.add(where)
                    tape_name = str(bwd.detail.get("tape_name") or "tape")
                    yield self.finding(
                        where,
                        f"{describe_event(ev)} runs inside `with {tape_name}:` after the loss `{bwd.name_of(loss)}` "
                        f"is computed ({line_ref(loss_ev.span, where)}): it is recorded and replayed by "
                        f"`{tape_name}.backward` ({line_ref(bwd.span, where)}); move it after the backward",
                        data={"tape": tape_name},
                        related=((loss_ev.span, "loss computed here"), (bwd.span, "backward here")),
                    )


def _site_in(ev: Event, block: Span) -> Span | None:
    """The statement of ``block`` (a with-statement span) through which ``ev`` runs."""
    for call in ev.call_stack:
        if contains(block, call):
            return call
    return ev.span if contains(block, ev.span) else None
