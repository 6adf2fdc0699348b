"""WF103 state-alias: a Python rebinding that makes two live buffers of one tape the same object, e.g.
`states[0] = states[-1]` between windows."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model.hazards import Hazard, alias_event, hazard_data, read_related
from warpfix.rules._hazard_rule import HazardRule
from warpfix.rules.base import Example, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project
    from warpfix.model.facts import Event
    from warpfix.model.source import SourceFile


def _one_use_scratch(alias: Event, src: SourceFile | None) -> bool:
    """For ``[x for _ in range(n)]``: ``x`` is a warp allocation (every array it holds fresh) bound once
    in the comprehension's scope and used nowhere else there, so that allocating it once per slot instead
    changes nothing the program reads elsewhere."""
    node = alias.node
    if src is None or not isinstance(node, ast.ListComp) or not isinstance(node.elt, ast.Name):
        return False
    if not alias.reads or not all(b.fresh and b.origin is not None for b in alias.reads):
        return False
    name = node.elt.id
    scopes = src.enclosing_functions(node)
    scope: ast.AST = scopes[0] if scopes else src.tree
    stores = loads = 0
    binding: list[ast.Assign] = []
    for n in ast.walk(scope):  # one pass: the name's uses, and the one plain assignment that binds it
        if isinstance(n, ast.Name) and n.id == name:
            if isinstance(n.ctx, ast.Store):
                stores += 1
            else:
                loads += 1
        elif isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return False
        elif (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
              and n.targets[0].id == name):
            binding.append(n)
    if stores != 1 or loads != 1 or len(binding) != 1 or not isinstance(binding[0].value, ast.Call):
        return False
    made = binding[0].value  # what allocated every array of the slot
    return all(b.origin.path == src.path and b.origin.line == made.lineno for b in alias.reads)  # type: ignore[union-attr]


def _allocated(alias: Event, events: Sequence[Event]) -> bool:
    """Whether the repeated slot of ``[make()] * n`` is a call that only allocates what it holds, so that one
    call per slot builds n distinct objects with the same values: each array the list's slot holds is a new
    one (a warp allocation, a project constructor's) or a member of the call's result that the program
    first touches later (``state.particle_q`` of ``model.state()``), and the model saw the call write
    nothing else at this evaluation."""
    node = alias.node
    if not (isinstance(node, ast.BinOp) and isinstance(node.left, (ast.List, ast.Tuple)) and node.left.elts):
        return False
    element = node.left.elts[0]
    if not isinstance(element, ast.Call) or not alias.reads:
        return False
    first, last = element.lineno, element.end_lineno or element.lineno
    own = {b.id for b in alias.reads}
    # only this evaluation of the list: a helper that builds it and is called again (another call site,
    # another loop pass) evaluates the same call at other frames, allocating other buffers
    if any(ev is not alias and ev.span.path == alias.span.path and first <= ev.span.line <= last
           and ev.call_stack == alias.call_stack and ev.loops == alias.loops
           and any(b.id not in own for b in (*ev.writes, *ev.accums)) for ev in events):
        return False  # the call writes something it did not allocate
    # the interpreter labels a library call's result by its callee (``self.model.state()``), without the arguments
    made = (ast.unparse(element) + ".",) + ((ast.unparse(element.func) + "().",) if alias.detail.get("library_made")
                                            else ())
    return all(b.fresh or (b.origin is None and b.label.startswith(made)) for b in alias.reads)


class StateAlias(HazardRule):
    id = "WF103"
    name = "state-alias"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Rotate distinct buffers instead of aliasing one state to another"
    doc = RuleDoc(
        what=(
            "Flags a Python rebinding (`states[0] = states[-1]`, `cur = nxt`) that makes two state slots the same "
            "array, or a list whose slots are one object (`[make()] * n`, `[x] * n`, `[x for _ in range(n)]`), "
            "when a later tape then reads the array under one name and overwrites it under the other."
        ),
        why=(
            "After `states[0] = states[-1]`, the next window's first substep reads the same array that its last "
            "substep writes. The first substep's adjoint replays against the final state instead of the initial "
            "one, so gradients are silently wrong while every forward value is right."
        ),
        example="""
for it in range(iters):
    tape = wp.Tape()
    with tape:
        for s in range(substeps):
            wp.launch(step, dim=n, inputs=[states[s], ctrl], outputs=[states[s + 1]])
        wp.launch(loss_kernel, dim=n, inputs=[states[-1]], outputs=[loss])
    tape.backward(loss)
    ...
    states[0] = states[-1]            # continue from the end state: aliases states[0] and states[-1]
""",
        use_instead="""
    states[0], states[-1] = states[-1], states[0]   # rotate: the carried data, distinct buffers
""",
        fix=("Safe: rotating keeps the carried data in `states[0]` and gives the last slot a different buffer. "
             "A list of one object gets one per slot: `[make() for _ in range(n)]` when `make()` only allocates, "
             "and `x = wp.zeros(...)` used nowhere but in `[x for _ in range(n)]` moves into the comprehension; "
             "an existing object has no automatic fix."),
    )
    _PREFIX = """
import warp as wp


@wp.kernel
def step(x: wp.array(dtype=float), u: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] + 0.1 * wp.sin(x[i]) + u[i]


@wp.kernel
def loss_kernel(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


u = wp.zeros(8, dtype=float, requires_grad=True)
s0 = wp.zeros(8, dtype=float, requires_grad=True)
s1 = wp.zeros(8, dtype=float, requires_grad=True)
s2 = wp.zeros(8, dtype=float, requires_grad=True)
states = [s0, s1, s2]
for it in range(3):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(step, dim=8, inputs=[states[0], u], outputs=[states[1]])
        wp.launch(step, dim=8, inputs=[states[1], u], outputs=[states[2]])
        wp.launch(loss_kernel, dim=8, inputs=[states[2]], outputs=[loss])
    tape.backward(loss)
    tape.zero()
"""
    VALID = [Example(_PREFIX + "    states[0], states[2] = states[2], states[0]\n")]
    INVALID = [
        Example(
            _PREFIX + "    states[0] = states[2]  # expect: WF103\n",
            expected_fix=_PREFIX + "    states[0], states[2] = states[2], states[0]  # expect: WF103\n",
        )
    ]

    def begin(self, project: Project) -> None:
        super().begin(project)
        self._files = project.files

    def report(self, hz: Hazard) -> Iterator[Finding]:
        alias = alias_event(hz, ("rebind",))
        if alias is None:
            return
        buf = hz.write.buffer
        target = alias.detail.get("target")
        source = alias.detail.get("source")
        target = target if isinstance(target, str) else "?"
        source = source if isinstance(source, str) else alias.name_of(buf)
        read_name, write_name = hz.read.name, hz.write.name
        if alias.detail.get("repeat"):
            made = _allocated(alias, hz.trace.events) or _one_use_scratch(alias, self._files.get(alias.span.path))
            yield self.finding(
                alias.span,
                f"`{target}` makes every slot of the list one object `{source}`: later on one tape "
                f"{hz.read.describe()} reads it as `{read_name}` and {hz.write.describe()} overwrites it as "
                f"`{write_name}`, so the reader's adjoint replays against the overwritten values",
                fix_safety=FixSafety.SAFE if made else FixSafety.NONE,
                fix_description="build the list with one fresh object per slot (`[make() for _ in range(n)]`)"
                + ("" if made else "; not automatic: the slot is not an allocation or constructor call"),
                data=hazard_data(hz, repeat=True),
                related=(*read_related(hz), (hz.write.event.span, f"`{write_name}` overwritten here")),
            )
            return
        yield self.finding(
            alias.span,
            f"`{target} = {source}` makes two state slots one array: later on one tape {hz.read.describe()} "
            f"reads it as `{read_name}` and {hz.write.describe()} overwrites it as `{write_name}`, so the "
            "reader's adjoint replays against the overwritten values",
            # a tape records the rebinding (a frame loop inside one tape): rotating would hand the source
            # slot a buffer this tape already read, so the codemod gives it a fresh one instead
            data=hazard_data(hz, **({"recorded": True} if alias.recorded else {})),
            related=(*read_related(hz), (hz.write.event.span, f"`{write_name}` overwritten here")),
        )

