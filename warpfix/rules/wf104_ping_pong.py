"""WF104 ping-pong: two buffers swapped in a loop on one tape (`a, b = b, a`, or `states[i % 2]`) so
step N+1 writes what step N read."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.facts import Event
from warpfix.model.hazards import Hazard, alias_event, hazard_data, read_related
from warpfix.model.local_binding import last_binding
from warpfix.rules._hazard_rule import HazardRule
from warpfix.rules._launch_alias import full_store_refusal
from warpfix.rules.base import Example, RuleDoc

if TYPE_CHECKING:
    from warpfix.finding import Span
    from warpfix.model import Project
    from warpfix.model.source import SourceFile


def _launch_args(ev: Event) -> dict[str, str]:
    return {p: ast.unparse(node) for p, node in ev.arg_nodes.items()}


def _rotating_binding(src: SourceFile, write: Span, name: str) -> Span | None:
    """The statement that last bound the local ``name`` before ``write`` when it took a slot used in turn
    (``x_next = self.x[(t + 1) % 2]``): where the ping-pong index is written. None otherwise."""
    found = last_binding(src, write.line, name)
    if found is None or not isinstance(found[1], ast.Subscript) or (found[0].end_lineno or 0) >= write.line:
        return None
    rotating = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(found[1].slice))
    return src.span(found[0]) if rotating else None


class PingPong(HazardRule):
    id = "WF104"
    name = "ping-pong"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = ("Allocate a fresh output per step (nxt = wp.empty_like(cur) ... cur = nxt; wp.clone(...) "
                       "where the launch writes only part of it)")
    doc = RuleDoc(
        what=(
            "Flags a recorded launch that overwrites an array an earlier recorded op of the same tape read: "
            "double buffers swapped in a loop (`a, b = b, a`, `states[i % 2]`), or one scratch array (`forces`) "
            "reused by every simulation step. Only readers whose adjoint needs the values count (non-linear "
            "use, branches, indices): a purely linear reader gets the same gradient either way."
        ),
        why=(
            "Step N+1 writes the buffer step N read. In the backward pass step N's adjoint replays against step "
            "N+1's values (the Warp documentation's two-step `forces` example returns `[-2, -4, -6]` instead of "
            "`[2, 4, 6]`). Nothing looks wrong in the forward pass."
        ),
        example="""
with tape:
    for step in range(steps):
        wp.launch(spring_step, dim=n, inputs=[cur, k], outputs=[nxt])
        cur, nxt = nxt, cur
""",
        use_instead="""
with tape:
    for step in range(steps):
        nxt = wp.empty_like(cur)
        wp.launch(spring_step, dim=n, inputs=[cur, k], outputs=[nxt])
        cur = nxt
""",
        fix="Safe: every step writes fresh memory; forward values are identical.",
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def spring_step(x: wp.array(dtype=wp.vec2), k: float, y: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    p = x[i]
    y[i] = p - 0.01 * k * (wp.length(p) - 1.0) * wp.normalize(p)


@wp.kernel
def loss_kernel(x: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.length(x[i]))


cur = wp.ones(32, dtype=wp.vec2, requires_grad=True)
nxt = wp.zeros(32, dtype=wp.vec2, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    for step in range(10):
"""
    _SUFFIX = """    wp.launch(loss_kernel, dim=32, inputs=[cur], outputs=[loss])
tape.backward(loss)
"""
    VALID = [
        Example(
            _PREFIX
            + """        nxt = wp.empty_like(cur)
        wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[nxt])
        cur = nxt
"""
            + _SUFFIX
        ),
        Example(
            _PREFIX
            + """        out = wp.clone(cur)
        wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[out])
        cur = out
"""
            + _SUFFIX,
            note="`out = wp.clone(inp)` ... `inp = out`: every write lands in fresh memory",
        ),
    ]
    INVALID = [
        Example(
            _PREFIX
            + """        wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[nxt])
        cur, nxt = nxt, cur  # expect: WF104
"""
            + _SUFFIX,
            expected_fix=_PREFIX
            + """        nxt = wp.empty_like(nxt)
        wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[nxt])
        cur, nxt = nxt, cur  # expect: WF104
"""
            + _SUFFIX,
        ),
        Example(
            _PREFIX.replace("    for step in range(10):\n", "")
            + """    forces = wp.zeros(32, dtype=wp.vec2, requires_grad=True)
    wp.launch(spring_step, dim=32, inputs=[cur, 2.0], outputs=[forces])
    x1 = wp.empty_like(cur)
    wp.launch(spring_step, dim=32, inputs=[forces, 1.0], outputs=[x1])
    wp.launch(spring_step, dim=32, inputs=[x1, 2.0], outputs=[forces])  # expect: WF104
    cur = wp.empty_like(cur)
    wp.launch(spring_step, dim=32, inputs=[forces, 1.0], outputs=[cur])
"""
            + _SUFFIX,
            note="one scratch array reused by two steps (the Warp documentation's `forces` example)",
        ),
        Example(
            _PREFIX.replace("cur = wp.ones(", "states = [wp.ones(")
            .replace(
                "nxt = wp.zeros(32, dtype=wp.vec2, requires_grad=True)\n",
                "",
            )
            .replace(
                "requires_grad=True)\nloss",
                "requires_grad=True), wp.zeros(32, dtype=wp.vec2, requires_grad=True)]\nloss",
            )
            + """        src, dst = states[step % 2], states[(step + 1) % 2]  # expect: WF104
        wp.launch(spring_step, dim=32, inputs=[src, 2.0], outputs=[dst])
"""
            + _SUFFIX.replace("inputs=[cur]", "inputs=[states[0]]"),
            expected_fix=_PREFIX.replace("cur = wp.ones(", "states = [wp.ones(")
            .replace("nxt = wp.zeros(32, dtype=wp.vec2, requires_grad=True)\n", "")
            .replace(
                "requires_grad=True)\nloss",
                "requires_grad=True), wp.zeros(32, dtype=wp.vec2, requires_grad=True)]\nloss",
            )
            + """        states[(step + 1) % 2] = wp.empty_like(states[(step + 1) % 2])
        src, dst = states[step % 2], states[(step + 1) % 2]  # expect: WF104
        wp.launch(spring_step, dim=32, inputs=[src, 2.0], outputs=[dst])
"""
            + _SUFFIX.replace("inputs=[cur]", "inputs=[states[0]]"),
            note="`states[i % 2]` double buffering: reported where a name takes the slot used in turn; the "
            "slot gets the fresh buffer, so the later readers of `states[...]` see what the step wrote",
        ),
    ]

    def begin(self, project: Project) -> None:
        super().begin(project)
        self._files = project.files

    def report(self, hz: Hazard) -> Iterator[Finding]:
        ev = hz.write.event
        name = hz.write.name
        if ev.kernel is not None:
            writer = f"kernel `{ev.kernel.name}` at line {ev.span.line} overwrites `{name}` (parameter `{hz.write.param}`)"
        else:  # a copy into a buffer the steps use in turn
            writer = f"the `{ev.kind}` at line {ev.span.line} overwrites `{name}`"
        wrote = f"{writer} after {hz.read.describe()} read it on the same tape"
        swap = alias_event(hz, ("swap",))
        if swap is not None:
            targets = swap.detail.get("targets")
            written = name if isinstance(targets, list) and name in targets else None
            yield self.finding(
                swap.span,
                f"this swap makes the buffers ping-pong on one tape: {wrote}; that adjoint will replay "
                "against the new values. Allocate a fresh output per step",
                data=hazard_data(hz, **({"written": written} if written else {})),
                related=(*read_related(hz), (ev.span, f"`{name}` overwritten here")),
            )
            return
        # whether each step writes the whole output (a fresh array then holds what the reused one held)
        full = ev.kernel is None or hz.write.param is None or full_store_refusal(ev.kernel, hz.write.param) is None
        src = self._files.get(ev.span.path)
        root = name.split(".")[0]
        bound = _rotating_binding(src, ev.span, root) if src is not None and root.isidentifier() else None
        if bound is not None:  # the local took a slot used in turn: the ping-pong is written there
            yield self.finding(
                bound,
                f"`{root}` takes a buffer used in turn, so {wrote}; that adjoint will replay against "
                f"the new values. Allocate a fresh `{name}` for this step",
                data=hazard_data(hz, arg=_launch_args(ev).get(hz.write.param or "", name), full_write=full),
                related=(*read_related(hz), (ev.span, f"`{name}` overwritten here")),
            )
            return
        yield self.finding(
            ev.span,
            f"{wrote}; that adjoint will replay against the new values. Allocate a fresh `{name}` for this step",
            data=hazard_data(hz, arg=_launch_args(ev).get(hz.write.param or "", name), full_write=full),
            related=read_related(hz),
        )

