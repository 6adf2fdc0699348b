"""WF304 stale-grad-read: `.grad` read before the backward that should produce it, or after
`tape.zero()`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model import Project
from warpfix.model.call_order import call_apart, grad_write_data, recording_of, resumed_before
from warpfix.model.facts import Trace
from warpfix.model.grad_walk import early_read, takes_reference, walk_grads
from warpfix.model.tapeflow import anchor, line_ref, runs_with, tape_display_name
from warpfix.rules._tape_scope_examples import KERNELS
from warpfix.rules.base import Example, Rule, RuleDoc


def _asserts_zero(parents: dict[int, ast.AST], node: ast.AST) -> bool:
    """Whether the read sits in an assertion that compares against zero (``assert g == 0``,
    ``test.assertEqual(x.grad.numpy()[0], 0.0)``, ``assert_np_equal(x.grad.numpy(), np.zeros(n))``):
    a test checking that the gradient was cleared reads the zeros on purpose."""
    stmt: ast.AST | None = node
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = parents.get(id(stmt))
    compared: list[ast.expr] = []
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        name = _callee(call.func)
        if name.lower().startswith("assert"):
            compared = list(call.args)
    elif isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare):
        compared = [stmt.test.left, *stmt.test.comparators]
    return any(
        (isinstance(e, ast.Constant) and not isinstance(e.value, bool) and e.value == 0)
        or (isinstance(e, ast.Call) and _callee(e.func) in ("zeros", "zeros_like"))
        for e in compared
    )


def _callee(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


class StaleGradRead(Rule):
    id = "WF304"
    name = "stale-grad-read"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "move the `.grad` read after the backward (or before `tape.zero()`)"
    doc = RuleDoc(
        what=(
            "Flags a read of `x.grad` (an optimizer launch, `.numpy()`, a copy) before the backward that "
            "produces it, or after a `tape.zero()`/`tape.reset()` cleared it. A read inside a `with` block of "
            "the very tape whose backward produces it is an optimizer step on the tape: WF302 reports it."
        ),
        why=(
            "Before the backward `.grad` still holds the previous iteration's gradient (or zeros); after "
            "`tape.zero()` it holds zeros. Either way the optimizer steps with the wrong gradient, "
            "silently."
        ),
        example="""
tape.backward(loss)
tape.zero()
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])   # w.grad is all zeros here
""",
        use_instead="""
tape.backward(loss)
wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
tape.zero()
""",
        fix="Safe: the read moves to where the gradient it means exists.",
    )
    VALID = [
        Example(
            KERNELS
            + """
optimizer_grads = [w.grad]
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, optimizer_grads[0], 0.1])
    tape.reset()
""",
            note="taking a reference to .grad before the loop reads nothing",
        ),
        Example(
            KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
tape.backward(loss)
tape.zero()
with wp.ScopedCapture() as capture:
    tape.backward(loss)
wp.capture_launch(capture.graph)
print("gradient", w.grad.numpy())
""",
            note="the graph launch replays the captured backward: the read sees its gradient",
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
    tape.backward(loss)
    tape.reset()
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])  # expect: WF304
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
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])  # expect: WF304
    tape.reset()
""",
        ),
        Example(
            KERNELS
            + """
tape = wp.Tape()
with tape:
    wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
    wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
print("gradient", w.grad.numpy())  # expect: WF304
tape.backward(loss)
""",
        ),
    ]

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        events = trace.events
        for idx, ev, states, pending in walk_grads(trace):
            if ev.kind != "grad_read":
                continue
            grad = next((b for b in ev.reads if b.grad_of is not None), None)
            if grad is None or grad.grad_of is None:
                continue
            src = project.files.get(ev.span.path)
            if src is None:
                continue
            parents = src.statement_parents(ev.node)
            if takes_reference(parents, ev.node):
                continue
            owner = grad.grad_of.root()
            name = ev.name_of(grad)
            early = early_read(events, idx, pending, parents)
            if early is not None:
                bwd = early[1]
                if any(scope.tape == bwd.tape for scope in ev.tapes):
                    continue  # inside that tape's own `with` block: an optimizer step on the tape (WF302)
                resumed = resumed_before(ev, bwd)
                if resumed is not None:
                    yield self.finding(
                        resumed.at,
                        f"{resumed.opening()} reads `{name}` while it still holds the previous gradient (or zeros); "
                        "run the backward before the yield",
                        data=resumed.data(),
                        related=((bwd.span, "gradient produced here"), (ev.span, "the read")),
                    )
                    continue
                apart = call_apart(events, ev, bwd, recording_of(events, bwd))
                where = apart.site if apart is not None else anchor(ev, bwd)
                through = "" if apart is None else (
                    f"; this call reads it before the one that runs the backward ({line_ref(apart.backward, where)})"
                    ": call it after that")
                yield self.finding(
                    where,
                    f"`{name}` is read before the backward that produces it "
                    f"({line_ref(bwd.span, where)}): it still holds the previous gradient (or zeros){through}",
                    data={"tape": tape_display_name(bwd), **(apart.data() if apart is not None else {}),
                          **grad_write_data(events, ev, bwd, {owner.id}, apart)},
                    related=((bwd.span, "gradient produced here"),
                             *(((ev.span, "the read"),) if apart is not None else ())),
                )
            else:
                st = states.get(owner.id)
                if st is None or st.zeroed is None or st.backward is None or not runs_with(st.zeroed, ev):
                    continue
                if st.replays:  # a graph launched since the zero may have replayed a backward
                    continue
                if _asserts_zero(parents, ev.node):
                    continue
                zero = st.zeroed
                where = anchor(ev, zero)
                call = "reset" if zero.kind == "tape_reset" else "zero"
                yield self.finding(
                    where,
                    f"`{name}` is read after `{zero.detail.get('tape_name') or 'tape'}.{call}()` "
                    f"({line_ref(zero.span, where)}) cleared the gradient of the backward at "
                    f"{line_ref(st.backward.span, where)}: it reads zeros",
                    data={"tape": tape_display_name(zero)},
                    related=(
                        (zero.span, "gradient cleared here"),
                        (st.backward.span, "gradient produced here"),
                    ),
                )

