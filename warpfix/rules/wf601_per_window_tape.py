"""WF601 per-window-tape: inside one training iteration, a loop over frames/windows/chunks creates or
reuses a tape, calls backward inside the loop and sums gradients across windows, while state carries
from one window to the next: the summed gradient is not the gradient of the episode loss."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model import Project
from warpfix.model.facts import Loop, Trace
from warpfix.model.frame_tapes import TruncatedTape, truncated_tape
from warpfix.model.tapeflow import Window, anchor, iterations, line_ref
from warpfix.model.window_carry import (
    accumulated_seeds,
    carried_buffers,
    consumed_gradients,
    shown_params,
    steps_parameters,
    window_params,
)
from warpfix.rules._per_window_examples import SIM, SIM_MODULE
from warpfix.rules.base import Example, Rule, RuleDoc


class PerWindowTape(Rule):
    id = "WF601"
    name = "per-window-tape"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = (
        "one tape around the whole window loop and one backward after it (loss accumulated on the tape, "
        "distinct state buffers per step, fresh initial state per iteration)"
    )
    doc = RuleDoc(
        what=(
            "Flags a loop over frames/windows/chunks *inside one training iteration* that records a tape "
            "and calls `backward` in every window, sums the windows' gradients (no optimizer step between "
            "them), while simulation state written in one window is read by the next window's tape. "
            "Also the truncation: a tape made anew in every pass of a frame loop, whose passes carry state, "
            "and one backward after the loop."
        ),
        why=(
            "Each window's backward treats the state it starts from as a constant. Every path by which the "
            "parameters influence later windows through the carried state is dropped, so the summed "
            "gradient is not the gradient of the episode loss — for control and locomotion objectives "
            "the dropped terms dominate. Per-window finite differences agree perfectly, which hides the bug."
        ),
        example="""
for it in range(iters):
    q, v = init_state()
    for frame in range(frames):
        tape = wp.Tape()
        with tape:
            simulate(q, v, thrust, q_next, v_next)
            wp.launch(distance, dim=n, inputs=[q_next, goal], outputs=[loss])
        tape.backward(loss)                     # backward inside the frame loop
        wp.launch(accumulate, dim=1, inputs=[grad_sum, thrust.grad])
        tape.zero()
        q, v = q_next, v_next                   # state carries to the next window
    wp.launch(sgd, dim=1, inputs=[thrust, grad_sum, lr])
""",
        use_instead="""
for it in range(iters):
    states = [init_state()] + [alloc_state() for _ in range(frames * substeps)]
    tape = wp.Tape()
    with tape:
        for frame in range(frames):
            ...  # every step writes its own state buffer; loss accumulated with atomic_add on the tape
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, lr])
    tape.zero()
""",
        fix=(
            "Safe (the hoist codemod, `codemods/wf601_hoist.py`): forward values of the first iteration are "
            "unchanged and each backward becomes the gradient of the whole episode. The rewrite puts one tape "
            "around the window loop and one backward after it; adds each window's loss into a `<loss>_total` "
            "array with a small kernel on the tape; removes the cross-window gradient buffer so the optimizer "
            "reads `p.grad`, with `tape.zero()` after its last reader; grows a carried state list to "
            "`frames * K + 1` buffers (`states[i]` becomes `states[frame * K + i]`, a helper receives the "
            "window's slice, `states[0] = states[-1]` and end-of-window copies go); repeats the allocation of "
            "per-window scratch outputs (controls, activations) at the top of every window; and gives every "
            "training iteration a fresh initial state.\n\n"
            "Shapes rewritten: (1) the frame loop inline in `main` (or any function), state carried by names "
            "rebound to fresh arrays or by an indexed state list; (2) the frame loop in a helper that receives "
            "the state list (allocated in the same file), with `states[0] = states[-1]` between windows; "
            "(3) substeps in a class method (`model.step(states[s], states[s + 1], ctrl)`) on state objects "
            "with array attributes, end-of-window copies and host-side gradient sums. Anything else (a tape "
            "created outside the window loop, a loss neither allocated nor zeroed per window, a transformed "
            "`.grad` read, `break`/`return` in the window loop, a state list allocated in another file, "
            "in-place scratch updates) is left untouched and the apply report gives the manual recipe for "
            "that code.\n\n"
            "Memory: the full-horizon tape keeps every step's state alive until the backward; the edit summary "
            "names the number of extra state buffers and the allocation each one repeats. When it does not fit, "
            "use gradient checkpointing (recompute each window's forward during backward from a saved "
            "window-start state; Warp ships no utility, its `example_fluid_checkpoint.py` shows the pattern), "
            "never a silent per-window truncation. Truncated BPTT is a legitimate choice only when made "
            "explicitly.\n\n"
            "The truncation (a fresh `tape = wp.Tape()` in every pass, one backward after the loop; "
            "`codemods/wf601_frame_tape.py`): the creation in the loop goes when the loop's block makes the tape "
            "before the loop, else it moves there; every pass then re-enters one tape, and the backward replays "
            "the whole episode."
        ),
    )
    VALID = [
        Example(
            SIM
            + """
for it in range(5):
    q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for frame in range(frames):
            q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
            v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
            wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
            q, v = q_next, v_next
        wp.launch(distance, dim=n, inputs=[q, goal], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
    tape.zero()
""",
            note="one tape over the whole episode",
        ),
        Example(
            SIM
            + """
q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
for it in range(5):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
        wp.launch(distance, dim=n, inputs=[q_next, goal], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
    tape.zero()
    q, v = q_next, v_next
""",
            note="a backward in the training loop: one optimizer step per window",
        ),
        Example(
            SIM
            + """
q0 = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
v0 = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
for it in range(5):
    q, v = q0, v0
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for frame in range(frames):
            q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
            v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
            wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
            q, v = q_next, v_next
        wp.launch(distance, dim=n, inputs=[q, goal], outputs=[loss])
        wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
    tape.backward(loss)
    tape.zero()
""",
            note="the optimizer step recorded on the tape (WF302's finding) still trains `thrust`: the loop is "
            "a training loop, not a loop of windows that carry state",
        ),
        Example(
            SIM
            + """
q0 = wp.zeros(n, dtype=wp.vec3)
for it in range(5):
    grad_sum.zero_()
    for frame in range(frames):
        q = wp.clone(q0, requires_grad=True)
        v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
            wp.launch(distance, dim=n, inputs=[q_next, goal], outputs=[loss])
        tape.backward(loss)
        wp.launch(accumulate, dim=1, inputs=[grad_sum, thrust.grad])
        tape.zero()
    wp.launch(sgd, dim=1, inputs=[thrust, grad_sum, 0.01])
""",
            note="every window starts from a fresh state: nothing carries between the tapes",
        ),
        Example(SIM + """
for it in range(5):
    q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    for frame in range(frames):
        q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        with tape:
            wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
        q, v = q_next, v_next
    with tape:
        wp.launch(distance, dim=n, inputs=[q, goal], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
    tape.zero()
""", note="one tape re-entered in every frame records the whole episode"),
    ]
    INVALID = [
        Example(
            SIM
            + """
for it in range(5):
    grad_sum.zero_()
    q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    for frame in range(frames):
        q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
            wp.launch(distance, dim=n, inputs=[q_next, goal], outputs=[loss])
        tape.backward(loss)  # expect: WF601
        wp.launch(accumulate, dim=1, inputs=[grad_sum, thrust.grad])
        tape.zero()
        q, v = q_next, v_next
    wp.launch(sgd, dim=1, inputs=[thrust, grad_sum, 0.01])
""",
        ),
        Example(
            {
                "main.py": """
import warp as wp

import sim

thrust = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
state = sim.State(8)
for it in range(5):
    state.reset()
    for frame in range(4):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            sim.simulate(state, thrust, loss)
        tape.backward(loss)  # expect: WF601
    wp.launch(sim.sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
    tape.zero()
""",
                "sim.py": SIM_MODULE,
            },
            note="the frame loop is in main.py, the state carry happens inside sim.simulate",
        ),
        Example(SIM + """
for it in range(5):
    q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    for frame in range(frames):
        q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        v_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        tape = wp.Tape()
        with tape:  # expect: WF601
            wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
        q, v = q_next, v_next
    with tape:
        wp.launch(distance, dim=n, inputs=[q, goal], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
    tape.zero()
""", note="a new tape per frame, one backward after the loop: it replays the last frame"),
    ]

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        for loop in trace.loops.values():
            truncated = truncated_tape(trace, loop)
            if truncated is not None:
                yield self._truncated(trace, loop, truncated)
            if not (loop.contains_backward and loop.contains_tape):
                continue
            for w0, w1 in iterations(trace, loop.id):
                finding = self._window_pair(trace, loop, w0, w1)
                if finding is not None:
                    yield finding
                    break

    def _window_pair(self, trace: Trace, loop: Loop, w0: Window, w1: Window) -> Finding | None:
        events = trace.events
        first = events[w0.start : w0.stop]
        second = events[w1.start : w1.stop]
        bwd0 = next((e for e in first if e.kind == "backward"), None)
        bwd1 = next((e for e in second if e.kind == "backward"), None)
        if bwd0 is None or bwd1 is None or not any(e.kind == "tape_begin" for e in first):
            return None
        params = window_params(first)
        later = window_params(second)
        # the parameters both windows read, and those whose gradient the program consumes although only the first
        # window reads them (a set-up under `if k == 0:`): the later windows reach them only through the state
        # the first carries over, which their per-window backwards treat as constant
        consumed = consumed_gradients(trace)
        params = {k: v for k, v in params.items() if k in later or k in consumed}
        if not params or steps_parameters(events[w0.start : w1.stop], params):
            return None
        carried = carried_buffers(first, second)
        if not carried:
            return None
        reader, bufs = carried
        names = [reader.name_of(b) for b in bufs]
        shown = shown_params(trace, params)
        src_loop = loop.span
        tape_name = str(bwd0.detail.get("tape_name") or "tape")
        return self.finding(
            bwd0.span,
            f"`{tape_name}.backward` runs once per window of the loop `{_loop_head(loop)}` "
            f"({line_ref(src_loop, bwd0.span)}) and the windows' gradients of "
            f"{shown} are summed, but "
            f"{', '.join(f'`{n}`' for n in names)} {'carries' if len(names) == 1 else 'carry'} from one window "
            f"into the next "
            f"(read on the next window's tape at {line_ref(reader.span, bwd0.span)}): each backward treats the "
            f"window's start state as a constant, so the sum is not the gradient of the episode loss",
            data={
                "loop": {
                    "path": src_loop.path,
                    "line": src_loop.line,
                    "end_line": src_loop.end_line,
                    "var": loop.var,
                },
                "tape": tape_name,
                "backward_line": bwd0.span.line,
                "carried": names,
                "params": [p.label for p in params.values()],
                "loss": bwd0.detail.get("loss"),
                # a loss-less backward seeded through arrays every window accumulates into
                "seeds": accumulated_seeds(first, bwd0),
                # per-window gradient handling the hoist removes: reads of the parameters' .grad, tape.zero()
                "grad_reads": sorted(
                    {
                        anchor(e, bwd0).line
                        for e in first
                        if e.kind == "grad_read" and any(b.grad_of is not None and b.grad_of.root().id in params
                                                         for b in e.reads)
                    }
                ),
                "tape_zero_lines": sorted({anchor(e, bwd0).line for e in first if e.kind in ("tape_zero", "tape_reset")}),
            },
            related=((src_loop, "window loop"), (reader.span, "carried state read here")),
        )


    def _truncated(self, trace: Trace, loop: Loop, found: TruncatedTape) -> Finding:
        """A fresh tape per pass of ``loop`` and one backward after it: the backward sees the last pass."""
        tape = str(found.backward.detail.get("tape_name") or "tape")
        names = ", ".join(f"`{found.reader.name_of(b)}`" for b in found.carried)
        at = found.begin.span
        return self.finding(
            at,
            f"`{tape}` is made anew in every pass of the loop `{_loop_head(loop)}` ({line_ref(loop.span, at)}) "
            f"and `{tape}.backward` ({line_ref(found.backward.span, at)}) runs once after it: the backward replays "
            f"the last pass's recording only, while {names} {'carry' if len(found.carried) > 1 else 'carries'} the "
            f"state from one pass into the next "
            f"(read on the next pass's tape at {line_ref(found.reader.span, at)}); the gradient of "
            f"{shown_params(trace, found.params)} through the earlier passes is dropped (a silent truncation)",
            data={
                "shape": "tape-per-pass",
                "loop": {"path": loop.span.path, "line": loop.span.line, "end_line": loop.span.end_line,
                         "var": loop.var},
                "tape": tape,
                "backward_line": found.backward.span.line,
                "carried": [found.reader.name_of(b) for b in found.carried],
                "params": [p.label for p in found.params.values()],
                "setup_lines": [e.span.line for e in found.setup if e.span.path == loop.span.path],
            },
            related=((loop.span, "frame loop"), (found.backward.span, "the one backward")),
        )


def _loop_head(loop: Loop) -> str:
    node = loop.node
    if isinstance(node, ast.For):
        return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
    return f"while {ast.unparse(node.test)}"
