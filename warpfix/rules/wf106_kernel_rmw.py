"""WF106 kernel-rmw: a kernel launched on a tape that reads and then overwrites the same element of its
own array argument (`x[i] = f(x[i])`, a clamp `if x[i] > c: x[i] = c`)."""

from __future__ import annotations

from warpfix.finding import FixSafety, Severity
from warpfix.rules._kernel_rmw import KernelRmwRule
from warpfix.rules.base import Example, RuleDoc


class KernelRmw(KernelRmwRule):
    id = "WF106"
    name = "kernel-rmw"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "Write to a new output argument and rebind it at the launch sites"
    struct_fields = False
    doc = RuleDoc(
        what=(
            "Flags a kernel launched on a tape that reads an element of its own array argument and then "
            "overwrites the same element: `x[i] = f(x[i])`, or a clamp `if x[i] > c: x[i] = c`, when the old "
            "value matters to an adjoint: `f` is non-linear or a branch tests it, or an earlier recorded op's "
            "adjoint needs the values the launch overwrites. A linear in-place update that nothing else read "
            "(`x[i] = x[i] + dt * v[i]`) keeps correct gradients and is not reported, nor is an integer array "
            "(a counter) whose loaded values reach no index of a non-integer array, no float store and no branch or "
            "loop over float work, nor a kernel compiled with `enable_backward=False` (no adjoint replays it) unless "
            "it overwrites what an earlier recorded op read. The same shape through a launch is reported at the "
            "launch: one array passed as an input the kernel reads and as the output it overwrites "
            "(`inputs=[w], outputs=[w]`); its fix passes a fresh output (`w_out = wp.empty_like(w)`) and "
            "rebinds `w = w_out` after the launch."
        ),
        why=(
            "The backward pass re-runs the kernel body on the array's current contents, which the forward pass "
            "already replaced. A clamp no longer sees the element out of range and passes gradient through where "
            "it should block it; `f'(x)` is evaluated at `f(x)`. Earlier readers of `x` replay against the new "
            "values too."
        ),
        example="""
@wp.kernel
def clamp_height(q: wp.array(dtype=float), q_max: float):
    i = wp.tid()
    if q[i] > q_max:
        q[i] = q_max
""",
        use_instead="""
@wp.kernel
def clamp_height(q: wp.array(dtype=float), q_max: float, q_out: wp.array(dtype=float)):
    i = wp.tid()
    q_out[i] = q[i]
    if q[i] > q_max:
        q_out[i] = q_max

# at every launch site
q_out = wp.empty_like(q)
wp.launch(clamp_height, dim=n, inputs=[q, q_max], outputs=[q_out])
q = q_out
""",
        fix=("Safe: the output goes to fresh memory and the name is rebound; forward values are unchanged. A kernel "
             "that writes the element in several steps (`v[i] = a` then `v[i] = f(v[i])`) keeps it in a local and "
             "stores it once at the end instead: the same values, and no launch changes."),
    )
    _KERNEL = """
import warp as wp


@wp.kernel
def clamp_height(q: wp.array(dtype=float), q_max: float):
    i = wp.tid()
    if q[i] > q_max:
        q[i] = q_max  # expect: WF106


@wp.kernel
def loss_kernel(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


q = wp.full(16, 2.0, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""
    VALID = [
        Example(
            _KERNEL.replace("  # expect: WF106", "")
            + """
wp.launch(clamp_height, dim=16, inputs=[q, 1.0])
tape = wp.Tape()
with tape:
    wp.launch(loss_kernel, dim=16, inputs=[q], outputs=[loss])
tape.backward(loss)
""",
            note="the in-place clamp runs before recording starts",
        ),
        Example(
            """
import warp as wp


@wp.kernel
def accumulate(q: wp.array(dtype=float), dq: wp.array(dtype=float)):
    i = wp.tid()
    q[i] += dq[i]
    wp.atomic_add(q, 0, dq[i])


q = wp.zeros(16, dtype=float, requires_grad=True)
dq = wp.ones(16, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(accumulate, dim=16, inputs=[q, dq])
""",
            note="accumulation is not an overwrite",
        ),
        Example(
            """
import warp as wp


@wp.kernel
def drift(q: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    q[i] = q[i] + dt * v[i]


@wp.kernel
def loss_kernel(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


q = wp.ones(16, dtype=float, requires_grad=True)
v = wp.ones(16, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(drift, dim=16, inputs=[q, v, 0.1])
    wp.launch(loss_kernel, dim=16, inputs=[q], outputs=[loss])
tape.backward(loss)
""",
            note="a linear in-place update that no earlier op read: the adjoint does not need the old value",
        ),
        Example(
            """
import warp as wp


@wp.kernel
def step(generation: wp.array[wp.int32], x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    if i == 0:
        g = generation[0]
        if g == 2147483647:
            g = 0
        else:
            g = g + 1
        generation[0] = g
    y[i] = wp.sin(x[i])


generation = wp.zeros(1, dtype=wp.int32)
x = wp.ones(16, dtype=float, requires_grad=True)
y = wp.zeros(16, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(step, dim=16, inputs=[generation, x], outputs=[y])
""",
            note="an integer counter (newton's contact generation): its values reach no index, float store or "
            "branch over float work, so the replay cannot change a gradient",
        ),
    ]
    INVALID = [
        Example(
            _KERNEL
            + """
tape = wp.Tape()
with tape:
    wp.launch(clamp_height, dim=16, inputs=[q, 1.0])
    wp.launch(loss_kernel, dim=16, inputs=[q], outputs=[loss])
tape.backward(loss)
"""
        )
    ]
