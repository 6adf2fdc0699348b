"""WF106/WF401 (``KernelOutput``): no rebinding of an array whose ``.grad`` the program reads.

Warp clears the gradient of an array a kernel stores to once that kernel's backward has used it.
Rebinding ``self.v = v_out`` after an in-place kernel therefore hands the optimizer step
``sgd(self.v, self.v.grad)`` the new output's cleared gradient (zeros: the training stalls, seen on
golden/WF106-graph-captured run eagerly) instead of the gradient of the array the launch read.
"""

from __future__ import annotations

import textwrap

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.fixes import compute_edits

PROGRAM = textwrap.dedent("""\
    import warp as wp


    @wp.kernel
    def squash(x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = wp.tanh(x[i])


    class Trainer:
        def forward(self):
            wp.launch(squash, dim=4, inputs=[self.v])

        def step(self):
            wp.launch(sgd, dim=4, inputs=[self.v, self.v.grad, 0.1])
""")


def finding(line: int) -> Finding:
    return Finding(rule="WF106", name="kernel-rmw", severity=Severity.ERROR, span=Span("sim.py", line, 1, line, 2),
                   message="m", fix=Fix(FixSafety.SAFE, "fix"))


def test_an_array_whose_gradient_is_read_is_not_rebound() -> None:
    result = compute_edits({"sim.py": PROGRAM}, [finding(7)])
    assert result.new_sources == {}
    [(_, reason)] = result.skipped
    assert "the program reads self.v.grad" in reason


def test_the_gradient_of_another_array_or_a_local_elsewhere_does_not_block() -> None:
    other = PROGRAM.replace("self.v.grad", "self.w.grad")
    assert "self.v = x_out" in compute_edits({"sim.py": other}, [finding(7)]).new_sources["sim.py"]
    local = PROGRAM.replace("inputs=[self.v])", "inputs=[v])\n        self.y = v").replace(
        "def forward(self):", "def forward(self):\n        v = wp.zeros(4, dtype=float, requires_grad=True)")
    local = local.replace("self.v.grad", "v.grad")  # another function's `v`
    assert "        v = x_out\n" in compute_edits({"sim.py": local}, [finding(7)]).new_sources["sim.py"]


def test_a_kernel_storing_one_slab_starts_its_output_as_a_copy() -> None:
    """``u[s, i, j] /= ...`` (one slab of a history array): a fresh ``wp.empty_like`` output would hold other
    values in every other slab, so the launch clones the array instead; a store at the thread's own element keeps
    ``wp.empty_like``."""
    history = textwrap.dedent("""\
        import warp as wp


        @wp.kernel
        def cool(u: wp.array3d(dtype=float), s: int, rate: float):
            i, j = wp.tid()
            u[s, i, j] /= 1.0 + rate * u[s, i, j]


        u = wp.ones((3, 4, 4), dtype=float, requires_grad=True)
        for t in range(3):
            wp.launch(cool, dim=(4, 4), inputs=[u, t, 0.5])
    """)
    out = compute_edits({"sim.py": history}, [finding(7)]).new_sources["sim.py"]
    assert "u_out = wp.clone(u)" in out and "u_out[s, i, j] = u[s, i, j] / (1.0 + rate * u[s, i, j])" in out
    whole = history.replace("u: wp.array3d(dtype=float), s: int", "u: wp.array2d(dtype=float), s: int").replace(
        "u[s, i, j]", "u[i, j]")
    assert "u_out = wp.empty_like(u)" in compute_edits({"sim.py": whole}, [finding(7)]).new_sources["sim.py"]
