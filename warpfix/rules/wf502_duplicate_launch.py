"""WF502 duplicate-launch: the same launch (same kernel, same argument expressions) recorded twice in a
row on one tape, with no write to its inputs between."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.duplicate_launches import accumulates_only, trace_duplicates, trace_retained
from warpfix.model.value_reads import overwritten_params
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project
    from warpfix.model.facts import Trace


class DuplicateLaunch(Rule):
    id = "WF502"
    name = "duplicate-launch"
    severity = Severity.WARNING
    fix_safety = FixSafety.SAFE
    fix_description = "Delete the repeated launch"
    doc = RuleDoc(
        what=(
            "Flags a launch recorded twice in a row on one tape: the same kernel with the same argument "
            "expressions, bound to the same arrays, with no write to its inputs in between, where the kernel only "
            "stores into its outputs (so the repeat recomputes identical values), or only accumulates into them "
            "(so the repeat adds the same contribution again)."
        ),
        why=(
            "The repeat does not change any forward value but doubles the adjoint work, and wherever the output "
            "adjoint is not consumed by the store (outputs with `retain_grad=True`, adjoints passed in from "
            "outside) the inputs receive the gradient twice. It is an error when an output retains its gradient, "
            "a warning otherwise. An accumulating kernel repeated counts its contribution twice in the forward "
            "and the backward alike: an error, whose fix (delete the repeat) is unsafe, because it changes the "
            "forward values: the contribution is then counted once."
        ),
        example="""
with tape:
    wp.launch(compute_forces, dim=n, inputs=[q, k], outputs=[f])
    wp.launch(compute_forces, dim=n, inputs=[q, k], outputs=[f])     # pasted twice
    wp.launch(integrate, dim=n, inputs=[q, v, f], outputs=[q1, v1])
""",
        use_instead="""
with tape:
    wp.launch(compute_forces, dim=n, inputs=[q, k], outputs=[f])
    wp.launch(integrate, dim=n, inputs=[q, v, f], outputs=[q1, v1])
""",
        fix=(
            "Safe for a kernel that only stores into its outputs: it is idempotent there, so deleting the repeat "
            "leaves every value unchanged. Unsafe (`--unsafe-fixes`) for an accumulating kernel: deleting the "
            "repeat counts the contribution once, so the forward values change; right when the launch was "
            "pasted twice by mistake, wrong when the double count is meant (write it as one launch with a "
            "factor of 2 then)."
        ),
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def spring_force(q: wp.array(dtype=float), k: wp.array(dtype=float), f: wp.array(dtype=float)):
    i = wp.tid()
    f[i] = -k[0] * q[i] * q[i]


@wp.kernel
def loss_kernel(f: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, f[i])


q = wp.ones(8, dtype=float)
k = wp.array([2.0], dtype=float, requires_grad=True)
f = wp.zeros(8, dtype=float, requires_grad=True, retain_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(spring_force, dim=8, inputs=[q, k], outputs=[f])
"""
    _SUFFIX = """    wp.launch(loss_kernel, dim=8, inputs=[f], outputs=[loss])
tape.backward(loss)
"""
    VALID = [
        Example(_PREFIX + _SUFFIX),
        Example(
            _PREFIX
            + """    for _ in range(2):
        wp.launch(loss_kernel, dim=8, inputs=[f], outputs=[loss])
tape.backward(loss)
""",
            note="one launch statement run twice by a loop: the repetition is the program's intent",
        ),
    ]
    INVALID = [
        Example(
            _PREFIX
            + """    wp.launch(loss_kernel, dim=8, inputs=[f], outputs=[loss])
    wp.launch(loss_kernel, dim=8, inputs=[f], outputs=[loss])  # expect: WF502
tape.backward(loss)
""",
        ),
        Example(
            _PREFIX
            + "    wp.launch(spring_force, dim=8, inputs=[q, k], outputs=[f])  # expect: WF502\n"
            + _SUFFIX,
            expected_fix=_PREFIX + _SUFFIX,
        )
    ]

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        keeps = trace_retained(trace)
        for first, repeat in trace_duplicates(trace):
            kd = repeat.kernel
            assert kd is not None
            retained = sorted(
                repeat.name_of(b)
                for p, b in repeat.binding.items()
                if p in overwritten_params(kd) and b.id in keeps
            )
            message = (
                f"kernel `{kd.name}` is launched again with the same arguments as at line {first.span.line} "
                "and nothing it reads changed in between"
            )
            if accumulates_only(kd):
                into = ", ".join(f"`{repeat.name_of(b)}`" for p, b in repeat.binding.items()
                                 if kd.params[p].accumulated)
                yield self.finding(
                    repeat.span,
                    f"{message}: it accumulates into {into} a second time, so the forward counts the "
                    "contribution twice and backward hands its inputs the adjoint twice",
                    severity=Severity.ERROR,
                    fix_safety=FixSafety.UNSAFE,
                    fix_description="Delete the repeated launch (unsafe: the contribution is then counted once, "
                    "so the forward values change; right if the launch was pasted twice by mistake)",
                    data={"accumulates": True},
                    related=((first.span, "first launch"),),
                )
                continue
            if retained:
                message += f"; `{', '.join(retained)}` keeps its gradient, so the inputs receive it twice"
            else:
                message += ": the repeat only doubles the adjoint work"
            yield self.finding(
                repeat.span,
                message,
                severity=Severity.ERROR if retained else None,
                related=((first.span, "first launch"),),
            )
