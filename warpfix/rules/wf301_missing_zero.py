"""WF301 missing-zero: a tape, or persistent arrays, reused across optimizer iterations with no
`tape.zero()` / `tape.reset()` / `grad.zero_()` between backward calls (gradients are summed over
iterations); also a tape object re-entered every iteration without `reset()` (it records the new
iteration on top of the old ones: gradients grow x1, x2, x3). The backward may live in a method
(`self.tape.backward(self.loss)`) called from a loop anywhere: `__main__`, a library runner, a
progress-bar helper."""

from __future__ import annotations

from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model import Project
from warpfix.model.facts import Buffer, Event, Trace, exclusive
from warpfix.model.grad_walk import GradState, walk_grads
from warpfix.model.stale_adjoints import StaleAdjoint, stale_adjoints
from warpfix.model.tapeflow import DIFFERENTIABLE, RESET_KINDS, line_ref, outputs, tape_of, true_reads
from warpfix.rules._tape_scope_examples import KERNELS
from warpfix.rules.base import Example, Rule, RuleDoc


def _leaves(events: list[Event], tape: int | None, start: int, stop: int) -> dict[int, Buffer]:
    """Parameters of the recording of ``tape`` in ``events[start:stop]``: arrays with a gradient that
    its ops read and never overwrite."""
    read: dict[int, Buffer] = {}
    written: set[int] = set()
    for ev in events[start:stop]:
        if tape_of(ev) != tape or ev.kind not in DIFFERENTIABLE:
            continue
        for buf in true_reads(ev):
            root = buf.root()
            if root.requires_grad and root.grad_of is None:
                read.setdefault(root.id, root)
        written.update(b.root().id for b in ev.writes)
    return {k: v for k, v in read.items() if k not in written}


# An intermediate the tape only accumulates into (``pooled``), allocated once, read by the loss launch.
_POOLED = KERNELS + """

@wp.kernel
def pool(y: wp.array(dtype=float), pooled: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(pooled, 0, y[i])


@wp.kernel
def square(pooled: wp.array(dtype=float), loss: wp.array(dtype=float)):
    loss[0] = pooled[0] * pooled[0]


pooled = wp.zeros(1, dtype=float, requires_grad=True)
"""


class MissingZero(Rule):
    id = "WF301"
    name = "missing-zero"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "call `tape.zero()` after the gradient is consumed"
    doc = RuleDoc(
        what=(
            "Flags a backward pass that accumulates into a parameter's `.grad` which still holds the "
            "gradient of an earlier backward that was already consumed (read by an optimizer step, copied, "
            "printed), with no `tape.zero()`, `tape.reset()` or `param.grad.zero_()` in between; and a "
            "tape re-entered every iteration without `reset()` whose new recording uses the arrays of the "
            "launches its earlier backward already replayed (the backward in a method is followed through "
            "its callers' loops); and an intermediate allocated once that the tape only accumulates into "
            "(`wp.atomic_add`) and a recorded launch reads, whose `.grad` the previous backward left "
            "non-zero (no adjoint store clears it) when only the parameters' gradients are zeroed."
        ),
        why=(
            "`tape.backward()` adds into `.grad`. Without zeroing, iteration k's gradient is the sum of the "
            "gradients of iterations 0..k: each one is right, the sum is not, and training diverges or "
            "stalls while every single backward looks correct."
        ),
        example="""
tape = wp.Tape()
for it in range(iters):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=n, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=n, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
        use_instead="""
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.zero()
""",
        fix=("Safe: `tape.zero()` after the gradient is consumed clears exactly what the next backward adds to, "
             "an intermediate's left-over adjoint included; where no such place is mechanical, "
             "`<array>.grad.zero_()` just before the backward, for the arrays named in the backward's own "
             "function. Only gradient buffers are cleared, after their use: no forward value changes."),
    )
    VALID = [
        Example(
            KERNELS
            + """
for it in range(20):
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.zero()
""",
        ),
        Example(
            KERNELS
            + """
for it in range(20):
    loss.zero_()
    w.grad.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
        ),
        Example(
            KERNELS
            + """
w_np = np.zeros(2)
for it in range(20):
    params = wp.array(w_np, dtype=float, requires_grad=True)
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, params], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    w_np = w_np - 0.1 * params.grad.numpy()
""",
            note="a fresh parameter array (and so a fresh .grad) every iteration",
        ),
        Example(
            _POOLED
            + """
for it in range(20):
    pooled.zero_()
    w.grad.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(pool, dim=32, inputs=[y], outputs=[pooled])
        wp.launch(square, dim=1, inputs=[pooled], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.zero()
""",
            note="the intermediate's adjoint is cleared with the tape's gradients after the update",
        ),
    ]
    INVALID = [
        Example(
            KERNELS
            + """
for it in range(20):
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)  # expect: WF301
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
            expected_fix=KERNELS
            + """
for it in range(20):
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)  # expect: WF301
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.zero()
""",
        ),
        Example(
            KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)  # expect: WF301
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.zero()
""",
            note="one tape re-entered every iteration without reset(): each backward replays all earlier ones",
            expected_fix=KERNELS
            + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)  # expect: WF301
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
    tape.reset()
""",
        ),
        Example(
            _POOLED
            + """
for it in range(20):
    pooled.zero_()
    w.grad.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(pool, dim=32, inputs=[y], outputs=[pooled])
        wp.launch(square, dim=1, inputs=[pooled], outputs=[loss])
    tape.backward(loss)  # expect: WF301
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
""",
            note="w.grad is zeroed, pooled.grad is not: the tape only accumulates into pooled, so no adjoint "
            "store clears it, and the next backward hands the old adjoint on to y and w",
        ),
    ]

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        events = trace.events
        intermediates = {id(found.backward): found for found in stale_adjoints(events)}
        at_site: dict[Span, tuple[StaleAdjoint, bool]] = {}  # the intermediates' findings, one per backward site
        for idx, ev, states, _pending in walk_grads(trace):
            if ev.kind != "backward" or ev.tape is None:
                continue
            replayed = _rerecorded(events, idx, ev.tape)
            if replayed is not None:
                tape_name = str(ev.detail.get("tape_name") or "tape")
                yield self.finding(
                    ev.span,
                    f"`{tape_name}` records this iteration on top of what its backward at "
                    f"{line_ref(replayed[1].span, ev.span)} already replayed (no `{tape_name}.reset()` "
                    f"in between): this backward replays the old launches too, on the same arrays, so "
                    f"gradients grow x1, x2, x3 over iterations; call `{tape_name}.reset()` before recording again",
                    data={"tape": tape_name, "rerecorded": True},
                    related=((replayed[0].span, "recorded before the earlier backward"),
                             (replayed[1].span, "earlier backward")),
                )
                continue
            stale = []
            leaves = _leaves(events, ev.tape, _replayed_from(events, idx, ev.tape), idx)
            for pid, buf in leaves.items():
                st = states.get(pid)
                if st is None or st.backward is None or st.consumed is None or st.zeroed is not None:
                    continue
                if st.replayed_before(ev):
                    continue
                if exclusive(st.backward, ev) or st.backward is ev:
                    continue
                stale.append((buf, st))
            if not stale:
                found = intermediates.get(id(ev))
                if found is not None:
                    # a parameter gradient an earlier backward left, neither consumed nor zeroed since, that is
                    # read later: the program sums it over backwards (windows, mini-batches), which zeroing the
                    # tape would undo -- at any run of this backward (the first found is reported)
                    summing = any((st := states.get(pid)) is not None and st.backward is not None
                                  and st.zeroed is None and _sum_consumed(events, idx, pid, ev.tape)
                                  for pid in leaves if pid not in found.intermediates)
                    first_found, summed = at_site.get(ev.span, (found, False))
                    at_site[ev.span] = (first_found, summed or summing)
                continue
            first = stale[0][1]
            consumed = first.consumed
            assert consumed is not None and first.backward is not None
            names = ", ".join(dict.fromkeys(f"`{_grad_name(buf, st)}`" for buf, st in stale))  # one loop name, once
            tape_name = str(ev.detail.get("tape_name") or "tape")
            data: dict[str, object] = {"tape": tape_name, "arrays": [buf.label for buf, _ in stale]}
            zeroed = tape_name  # the tape whose gradient is left over
            if first.backward.span == ev.span:
                earlier = f"the previous iteration's backward ({line_ref(first.backward.span, ev.span)})"
            else:
                earlier = f"the backward at {line_ref(first.backward.span, ev.span)}"
                if first.backward.span.path == ev.span.path:  # the codemod may zero after that backward's use
                    data["earlier_line"] = first.backward.span.line
                zeroed = str(first.backward.detail.get("tape_name") or tape_name)
            yield self.finding(
                ev.span,
                f"`{tape_name}.backward` adds into {names}, which still holds the gradient of {earlier}, "
                f"already consumed at {line_ref(consumed.span, ev.span)}: gradients are summed over "
                f"iterations; call `{zeroed}.zero()` after the gradient is consumed",
                data=data,
                related=(
                    (first.backward.span, "earlier backward"),
                    (consumed.span, "gradient consumed here"),
                ),
            )
        for found, summing in at_site.values():
            yield self._intermediate(found, summing)

    def _intermediate(self, found: StaleAdjoint, summing: bool) -> Finding:
        """The backward starts from adjoints the earlier one left in intermediates it only accumulates into.
        The fix is the codemod's: ``tape.zero()`` once the gradient is consumed, which clears every array
        the tape recorded, or else ``<array>.grad.zero_()`` before the backward for the arrays named in the
        backward's own function (``local``). Where the program sums a parameter's gradient over backwards
        (``summing``), only the latter keeps it; with no local name there is then no fix."""
        ev, earlier, arrays, local = found.backward, found.earlier, found.names, found.local
        tape_name = str(ev.detail.get("tape_name") or "tape")
        names = ", ".join(f"`{name}.grad`" for name in arrays)
        one = len(arrays) == 1
        when = ("the previous iteration's backward" if earlier.span == ev.span
                else f"the backward at {line_ref(earlier.span, ev.span)}")
        return self.finding(
            ev.span,
            f"`{tape_name}.backward` adds into {names}, which still {'holds' if one else 'hold'} the adjoint {when} "
            f"left there: the tape only accumulates into {'it' if one else 'them'} (no store clears a gradient) and "
            f"nothing zeroes {'it' if one else 'them'} in between, so the old adjoint flows on into what was "
            f"accumulated; "
            + (f"zero {names} before the backward (the parameters' gradients are summed over backwards here, "
               f"which `{tape_name}.zero()` would clear too)" if summing else
               f"call `{tape_name}.zero()` after the gradient is consumed, or zero {names} before the backward"),
            fix_safety=FixSafety.NONE if summing and not local else self.fix_safety,
            data={"tape": tape_name, "arrays": local, "intermediate": True, "arrays_only": summing},
            related=((earlier.span, "earlier backward"),),
        )


def _sum_consumed(events: list[Event], idx: int, pid: int, tape: int) -> bool:
    """Whether the gradient of ``pid`` the backward at ``idx`` adds to is read after it (an optimizer step)
    before anything clears it: the program consumes the sum. A leaf whose gradient nobody reads (a model's
    constant arrays) sums for nothing, and clearing it changes nothing."""
    for ev in events[idx + 1:]:
        if ev.kind in ("tape_zero", "tape_reset") and ev.tape == tape:
            return False
        if ev.kind == "grad_zero" and any(b.grad_of is not None and b.grad_of.root().id == pid for b in ev.writes):
            return False
        if ev.kind != "backward" and any(b.grad_of is not None and b.grad_of.root().id == pid for b in ev.reads):
            return True
    return False


def _grad_name(buf: Buffer, st: GradState) -> str:
    """``x.grad`` as the consumer of the gradient wrote it (the allocation's text is no name)."""
    if st.consumed is not None:
        for read in st.consumed.reads:
            if read.grad_of is not None and read.grad_of.root().id == buf.id:
                return st.consumed.name_of(read)
    return f"{buf.label}.grad"


def _rerecorded(events: list[Event], idx: int, tape: int) -> tuple[Event, Event] | None:
    """(an old launch, the earlier backward) when the backward at ``idx`` replays launches its tape
    recorded before an earlier backward, without a reset, on arrays the new recording uses again."""
    prev = None
    for j in range(idx - 1, -1, -1):
        e = events[j]
        if e.tape == tape and e.kind == "tape_reset":
            return None
        if e.tape == tape and e.kind == "backward":
            prev = j
            break
    if prev is None:
        return None
    old = [e for e in events[_recording_start(events, prev, tape):prev]
           if tape_of(e) == tape and e.kind in DIFFERENTIABLE]
    new = [e for e in events[prev + 1:idx] if tape_of(e) == tape and e.kind in DIFFERENTIABLE]
    # an old launch's output that the new recording uses again gets its adjoint seeded (or fed) twice
    old_outputs = {b.root().id for e in old for b in outputs(e)}
    shared = [e for e in new if old_outputs & {b.root().id for b in (*outputs(e), *e.reads)}]
    return (old[0], events[prev]) if shared and not exclusive(events[prev], events[idx]) else None


def _replayed_from(events: list[Event], idx: int, tape: int) -> int:
    """Index of the first recording the backward at ``idx`` replays: Warp's ``backward`` keeps what the tape
    recorded, so a backward with nothing recorded since the previous one (a second loss differentiated on one
    tape: ``tape.backward(objective)`` ... ``tape.backward(volume)``) replays that one's recording again."""
    start = _recording_start(events, idx, tape)
    while start > 0 and events[start - 1].kind == "backward" and not any(
            tape_of(e) == tape and e.kind in DIFFERENTIABLE for e in events[start:idx]):
        start = _recording_start(events, start - 1, tape)
    return start


def _recording_start(events: list[Event], idx: int, tape: int) -> int:
    """Index after the previous backward/reset of ``tape`` before ``idx``."""
    for j in range(idx - 1, -1, -1):
        ev = events[j]
        if ev.tape == tape and ev.kind in RESET_KINDS:
            return j + 1
    return 0
