"""WF101 copy-writeback: `wp.copy(dst, src)` or `dst.assign(src)` on a tape, where `dst` was already
read by a recorded op of the same tape (often a projection/clamp stage writing back into the state)."""

from __future__ import annotations

from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.hazards import Hazard, hazard_data, read_related
from warpfix.rules._hazard_rule import HazardRule
from warpfix.rules._overwrite_examples import KERNELS
from warpfix.rules.base import Example, RuleDoc

_FRESH_REBIND = """
tape = wp.Tape()
with tape:
    for step in range(steps):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, dt], outputs=[q_new])
        q = q_new
    wp.launch(loss_kernel, dim=n, inputs=[q], outputs=[loss])
tape.backward(loss)
"""


_LINEAR_READER = (
    KERNELS.replace(
        "    lift = wp.vec3(0.0, wp.sin(q[i][1]), 0.0)  # a height-dependent field: the adjoint needs q\n"
        "    q_new[i] = q[i] + (v[i] + lift) * dt\n",
        "    q_new[i] = q[i] + v[i] * dt\n",
    )
    + """
tape = wp.Tape()
with tape:
    q_new = wp.empty_like(q)
    wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
    wp.copy(q, q_new)
    wp.launch(loss_kernel, dim=n, inputs=[q], outputs=[loss])
tape.backward(loss)
"""
)


class CopyWriteback(HazardRule):
    id = "WF101"
    name = "copy-writeback"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = (
        "Rebind the name to the copy's source instead of copying into an array the tape already read"
    )
    doc = RuleDoc(
        what=(
            "Flags a recorded `wp.copy(dst, src)` or `dst.assign(src)` whose destination was already read by an "
            "earlier recorded op of the same tape (typically a projection or clamp stage writing its result "
            "back into the state the integrator read)."
        ),
        why=(
            "Warp keeps gradients only for the last write to an array. The earlier op's adjoint runs in the "
            "backward pass against the array's *current* contents, which the copy replaced, so its gradient is "
            "computed at the wrong point. The forward pass is unaffected."
        ),
        example="""
with tape:
    for step in range(steps):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, dt], outputs=[q_new])   # reads q
        q_proj = wp.empty_like(q)
        wp.launch(floor_contact, dim=n, inputs=[q_new], outputs=[q_proj])
        wp.copy(q, q_proj)                                                # overwrites q
""",
        use_instead="""
with tape:
    for step in range(steps):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, dt], outputs=[q_new])
        q_proj = wp.empty_like(q)
        wp.launch(floor_contact, dim=n, inputs=[q_new], outputs=[q_proj])
        q = q_proj
""",
        fix=(
            "Safe: the copy is replaced by a rebinding of the destination (a name or an attribute such as "
            "`state.q`) to the source, so later readers see the same values in fresh memory."
        ),
        versions=(
            "Warp >= 1.17: the gradient is wrong when the copy changes values an earlier op read. Warp < 1.17: "
            "also wrong when the values are unchanged (the copy adjoint overwrote). The fix is the same."
        ),
    )
    VALID = [
        Example(KERNELS + _FRESH_REBIND),
        Example(
            _LINEAR_READER,
            note="Warp >= 1.17: the only reader of `q` is linear in it, so its adjoint does not need the old values",
        ),
        Example(
            KERNELS
            + """
tape = wp.Tape()
with tape:
    q_new = wp.empty_like(q)
    wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
    wp.launch(loss_kernel, dim=n, inputs=[q_new], outputs=[loss])
tape.backward(loss)
wp.copy(q, q_new)  # after backward: a new episode starts from here
""",
            note="a write-back after backward is a fresh start, not an overwrite on the tape",
        ),
    ]
    INVALID = [
        Example(
            KERNELS
            + """
tape = wp.Tape()
with tape:
    for step in range(8):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
        q_proj = wp.empty_like(q)
        wp.launch(floor_contact, dim=n, inputs=[q_new], outputs=[q_proj])
        wp.copy(q, q_proj)  # expect: WF101
    wp.launch(loss_kernel, dim=n, inputs=[q], outputs=[loss])
tape.backward(loss)
""",
            expected_fix=KERNELS
            + """
tape = wp.Tape()
with tape:
    for step in range(8):
        q_new = wp.empty_like(q)
        wp.launch(integrate, dim=n, inputs=[q, v, 0.01], outputs=[q_new])
        q_proj = wp.empty_like(q)
        wp.launch(floor_contact, dim=n, inputs=[q_new], outputs=[q_proj])
        q = q_proj  # expect: WF101
    wp.launch(loss_kernel, dim=n, inputs=[q], outputs=[loss])
tape.backward(loss)
""",
        ),
        Example(
            {
                "main.py": """
import warp as wp

from constraints import project_floor


@wp.kernel
def integrate(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), dt: float, q_new: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    lift = wp.vec3(0.0, wp.sin(q[i][1]), 0.0)
    q_new[i] = q[i] + (v[i] + lift) * dt


class State:
    def __init__(self, n):
        self.q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        self.v = wp.ones(n, dtype=wp.vec3, requires_grad=True)


state = State(16)
tape = wp.Tape()
with tape:
    for step in range(4):
        q_new = wp.empty_like(state.q)
        wp.launch(integrate, dim=16, inputs=[state.q, state.v, 0.01], outputs=[q_new])
        project_floor(state, q_new)
""",
                "constraints.py": """
import warp as wp


@wp.kernel
def floor_contact(q: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = q[i]
    out[i] = wp.vec3(p[0], wp.max(p[1], 0.0), p[2])


def project_floor(state, q_pred):
    q_proj = wp.empty_like(q_pred)
    wp.launch(floor_contact, dim=q_pred.shape[0], inputs=[q_pred], outputs=[q_proj])
    state.q.assign(q_proj)  # expect: WF101
""",
            },
            expected_fix={
                "constraints.py": """
import warp as wp


@wp.kernel
def floor_contact(q: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = q[i]
    out[i] = wp.vec3(p[0], wp.max(p[1], 0.0), p[2])


def project_floor(state, q_pred):
    q_proj = wp.empty_like(q_pred)
    wp.launch(floor_contact, dim=q_pred.shape[0], inputs=[q_pred], outputs=[q_proj])
    state.q = q_proj  # expect: WF101
""",
            },
            note="cross-file: main.py's integrator reads state.q, constraints.py writes it back",
        ),
        Example(
            _LINEAR_READER.replace("    wp.copy(q, q_new)\n", "    wp.copy(q, q_new)  # expect: WF101\n"),
            warp_version="1.16.0",
            note="before Warp 1.17 the copy adjoint mis-routes gradients even when the reader is linear",
        ),
    ]

    def report(self, hz: Hazard) -> Iterator[Finding]:
        ev = hz.write.event
        dst = hz.write.name
        src = ev.name_of(ev.reads[0]) if ev.reads else ""
        op = f"wp.copy({dst}, {src})" if ev.kind == "copy" else f"{dst}.assign({src})"
        yield self.finding(
            ev.span,
            f"`{op}` overwrites `{dst}` on the tape after {hz.read.describe()} read it; that adjoint will "
            f"replay against the copied values. Rebind instead: `{dst} = {src}`",
            data=hazard_data(hz, dst=dst, src=src),
            related=read_related(hz),
        )

