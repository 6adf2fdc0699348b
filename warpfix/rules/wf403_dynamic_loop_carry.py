"""WF403 dynamic-loop-carry: in a loop whose trip count is not a compile-time constant: a non-additive
accumulator (`p *= x[j]`, `p = p * f`), or a loop-computed local used after the loop in a non-linear
way (`s / norm`) — backward does not replay dynamic loops."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, FixSafety, Severity, not_automatic
from warpfix.model.loop_fix import Launch, fix_refusal
from warpfix.model.loop_hazards import dynamic_loop_hazards
from warpfix.model.reach import iter_taped
from warpfix.rules.base import Example, Rule, RuleDoc

if TYPE_CHECKING:
    from warpfix.model import Project
    from warpfix.model.facts import KernelDef, Trace


class DynamicLoopCarry(Rule):
    id = "WF403"
    name = "dynamic-loop-carry"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = (
        "make the loop bound static (wp.static / a constant <= max_unroll), move a summing loop into a "
        "@wp.func whose result the code after it uses, or accumulate additively (the exponent, for a "
        "product of exp) into an array and finish in a second kernel"
    )
    doc = RuleDoc(
        what=(
            "Flags, in a loop whose trip count is not a compile-time constant, an operation whose "
            "adjoint needs a value the loop carries across iterations (`p = p * x[j]`, "
            "`s += w * x[j]` with `w` updated in the loop), and a loop-computed value used "
            "non-linearly after the loop (`s / norm`)."
        ),
        why=(
            "Backward does not record dynamic loops: it re-runs the iterations in reverse order "
            "without restoring carried locals, so an adjoint inside the loop reads another value of "
            "them than the forward pass used, and code after the loop sees their value from before "
            "the loop. The "
            "product of `x = [2, 2, 2]` gets gradient `[32, 8, 2]` instead of `[4, 4, 4]`; "
            "`sum / norm` gets inf. Additive accumulation (`s += f(x[j])`) and static loops are fine."
        ),
        example="""
@wp.kernel
def product(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    p = float(1.0)
    for j in range(n):
        p = p * x[j]
    out[0] = p
""",
        use_instead="""
@wp.kernel
def product(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    p = float(1.0)
    for j in range(wp.static(N)):   # static trip count: unrolled, replayed exactly
        p = p * x[j]
    out[0] = p
""",
        fix=(
            "Safe, in three mechanical shapes (all keep every forward value: the same operations in the same "
            "order): when every launch of the kernel, through imports, passes the loop bound as the same "
            "constant <= max_unroll (16), the bound becomes `wp.static(C)` and the loop is unrolled; in a "
            "`@wp.func` whose final `return` post-processes the loop's accumulators (`return s / t`), the "
            "function returns them (`return s, t`) and every caller in the file does the division; otherwise, "
            "for a use after a kernel's loop whose carried values are all sums (`lambert = lambert + val` over "
            "`range(lights.num_lights)`), the loop moves into a new generic `@wp.func` that returns them, and "
            "the kernel uses the returned values (its backward replays the function's loop). Any other "
            "shape is skipped with the reason: an additive accumulation stored to an array and finished by a "
            "later kernel, per-iteration values in an array, or `exp` of a summed exponent are by hand "
            "(`wp.pow` and `exp(a + b)` are not bit-identical to the repeated product)."
        ),
    )
    VALID = [
        Example(
            """
import warp as wp

@wp.kernel
def energy(x: wp.array(dtype=float), n: int, damp: float, out: wp.array(dtype=float)):
    s = float(0.0)
    v = float(0.0)
    for j in range(n):
        s += x[j] * x[j]
        v = v * damp + x[j]
    out[0] = s * 0.5 + v

@wp.kernel
def product3(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    p = float(1.0)
    for j in range(3):
        p = p * x[j]
    out[0] = p

x = wp.ones(3, dtype=float, requires_grad=True)
out = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(energy, dim=1, inputs=[x, 3, 0.9], outputs=[out])
    wp.launch(product3, dim=1, inputs=[x], outputs=[out])
""",
            note="additive accumulation, linear recurrence, static loop",
        ),
        Example(
            """
import warp as wp

@wp.kernel
def joint_energy(q: wp.array(dtype=float), start: int, n: int, out: wp.array(dtype=float)):
    j = int(0)
    c = float(0.0)
    for i in range(n):
        j = start + i
        c = wp.sin(q[j])
        wp.atomic_add(out, 0, c * c)

q = wp.ones(8, dtype=float, requires_grad=True)
out = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(joint_energy, dim=1, inputs=[q, 2, 4], outputs=[out])
""",
            note="locals rebound at the top of every iteration are not carried: backward replays the body",
        ),
    ]
    INVALID = [
        Example(
            """
import warp as wp

@wp.kernel
def product(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    p = float(1.0)
    for j in range(n):
        p = p * x[j]  # expect: WF403
    out[0] = p

@wp.kernel
def normalized(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    s = float(0.0)
    norm = float(0.0)
    for j in range(x.shape[0]):
        s += x[j]
        norm += x[j] * x[j]
    out[0] = s / wp.sqrt(norm)  # expect: WF403

x = wp.ones(3, dtype=float, requires_grad=True)
out = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(product, dim=1, inputs=[x, 3], outputs=[out])
    wp.launch(normalized, dim=1, inputs=[x], outputs=[out])
""",
        ),
        Example(
            """
import warp as wp

@wp.kernel
def snap(p: wp.array(dtype=float), q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    best = float(1.0e10)
    k = int(0)
    for j in range(q.shape[0]):
        d = (p[i] - q[j]) * (p[i] - q[j])
        if d < best:
            best = d
            k = j
    wp.atomic_add(loss, 0, (p[i] - q[k]) * (p[i] - q[k]))  # expect: WF403

p = wp.ones(4, dtype=float, requires_grad=True)
q = wp.ones(8, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(snap, dim=4, inputs=[p, q], outputs=[loss])
""",
            note="an index chosen in a dynamic loop and used after it",
        ),
    ]

    def begin(self, project: Project) -> None:
        # id(kernel node) -> id(launch call) -> the launch: what the fix's static bound depends on
        self._launches: dict[tuple[str, tuple[int, int]], dict[int, Launch]] = {}
        # kernel -> array parameter -> whether a recorded launch may pass it an array with a gradient
        self._gradient: dict[tuple[str, tuple[int, int]], dict[str, bool]] = {}

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        for ev in trace.events:
            src = project.files.get(ev.span.path)
            if ev.kind == "launch" and ev.kernel is not None and src is not None and isinstance(ev.node, ast.Call):
                key = (ev.kernel.path, ev.kernel.key)
                self._launches.setdefault(key, {})[id(ev.node)] = (src.tree, ev.node, ev.arg_nodes)
                if ev.recorded:
                    seen = self._gradient.setdefault(key, {})
                    for param in ev.kernel.positional:
                        buf = ev.binding.get(param)
                        seen[param] = seen.get(param, False) or buf is None or buf.requires_grad is not False
        return iter(())

    def _no_gradient(self, kd: KernelDef) -> frozenset[str]:
        """A kernel's array parameters to which every recorded launch passes an array without a gradient."""
        if kd.kind != "kernel":  # a func's parameters take their callers' values
            return frozenset()
        seen = self._gradient.get((kd.path, kd.key), {})
        return frozenset(p for p, info in kd.params.items() if info.is_array and seen.get(p) is False)

    def check_project(self, project: Project) -> Iterator[Finding]:
        for kd, src, fn, severity in iter_taped(project, self.severity):
            for h in dynamic_loop_hazards(src, kd, fn, self._no_gradient(kd)):
                code = ast.unparse(h.node)
                loop_line = h.loop.lineno
                if h.operand is h.node:
                    when = "after" if h.after else "inside"
                    why = (
                        f"`{code}` {when} the dynamic loop at line {loop_line} is addressed by `{h.carried}`, "
                        f"which that loop carries; backward does not restore `{h.carried}`, so the adjoint "
                        f"goes to another element than the forward pass read"
                    )
                elif h.after:
                    why = (
                        f"`{h.carried}` is computed by the dynamic loop at line {loop_line}; backward does "
                        f"not replay that loop before this code, so the adjoint of `{code}` reads "
                        f"`{h.carried}` as it was before the loop"
                    )
                else:
                    why = (
                        f"the adjoint of `{code}` reads `{h.carried}`, which the dynamic loop at line "
                        f"{loop_line} carries from one iteration to the next; backward re-runs the iterations "
                        f"in reverse order without restoring `{h.carried}`, so it reads another value than "
                        f"the forward pass used"
                    )
                launches = self._launches.get((kd.path, kd.key), {}).values()
                refused = fix_refusal(src.tree, fn, kd.kind == "func", h.loop, h.stmt, h.after, launches)
                yield self.finding(
                    src.span(h.stmt),
                    f"in {kd.kind} `{kd.name}`: {why}",
                    fix_safety=None if refused is None else FixSafety.NONE,
                    fix_description=None if refused is None else not_automatic(self.fix_description, refused),
                    severity=severity,
                    data={
                        "kernel": kd.name,
                        "carried": h.carried,
                        "loop_line": loop_line,
                        "after_loop": h.after,
                        **({} if refused is None else {"no_edit": refused}),  # apply says why it makes no edit
                    },
                    related=((src.span(h.loop), "dynamic loop (trip count not a compile-time constant)"),),
                )
