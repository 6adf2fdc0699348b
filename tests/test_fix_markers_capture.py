"""``check``'s fix marker agrees with ``apply`` under graph capture (:mod:`warpfix.model.rebind_fix`).

A rebinding codemod refuses a place that outlives the call at a site a graph capture runs (a replay
reruns the captured launches, never the rebinding). ``check`` must then show no ``[*]``, say why
(the codemod's own words), and ``apply`` must make no edit; where the codemod does rebind (no
capture, a local of the captured function) the marker stays and the edit is made.
"""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from warpfix.engine import check_sources
from warpfix.finding import Finding, Fix, FixSafety
from warpfix.fixes import compute_edits

# In the shape of newton's example_diffsim_cloth.py: forward() runs inside wp.ScopedCapture (through
# forward_backward), and `self.com.zero_()` follows the loss launch that read `self.com`.
TRAINER = textwrap.dedent("""\
    import warp as wp


    @wp.kernel
    def com_kernel(q: wp.array(dtype=wp.vec3), n: int, com: wp.array(dtype=wp.vec3)):
        tid = wp.tid()
        wp.atomic_add(com, 0, q[tid] / float(n))


    @wp.kernel
    def loss_kernel(com: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
        delta = com[0] - target
        loss[0] = wp.dot(delta, delta)


    def reset(buf):
        buf.zero_()


    class Trainer:
        def __init__(self, n):
            self.n = n
            self.q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
            self.com = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
            self.loss = wp.zeros(1, dtype=float, requires_grad=True)
            self.target = wp.vec3(1.0, 0.0, 0.0)
            with wp.ScopedCapture() as capture:
                self.forward_backward()
            self.graph = capture.graph

        def forward_backward(self):
            self.tape = wp.Tape()
            with self.tape:
                self.forward()
            self.tape.backward(self.loss)

        def forward(self):
            self.com.zero_()
            wp.launch(com_kernel, dim=self.n, inputs=[self.q, self.n, self.com])
            wp.launch(loss_kernel, dim=1, inputs=[self.com, self.target, self.loss])
            self.com.zero_()

        def step(self):
            wp.capture_launch(self.graph)
            self.tape.zero()
""")
RESET = 41  # the zero_() after the read
# step() reads what the reset wrote: the reset is not dead, so nothing fixes it under the capture
OBSERVED = TRAINER.replace("        self.tape.zero()\n", "        self.tape.zero()\n        print(self.com.numpy())\n")
CAPTURE = "with wp.ScopedCapture() as capture:\n            self.forward_backward()\n        self.graph = capture.graph"
EAGER = TRAINER.replace(CAPTURE, "self.graph = None").replace("wp.capture_launch(self.graph)", "self.forward_backward()")
HELPER = TRAINER.replace("inputs=[self.com, self.target, self.loss])\n        self.com.zero_()",
                         "inputs=[self.com, self.target, self.loss])\n        reset(self.com)")
LOCAL = TRAINER.replace("self.com.zero_()\n        wp.launch(com_kernel", "com = wp.zeros(1, dtype=wp.vec3, requires_grad=True)\n"
                        "        wp.launch(com_kernel").replace("self.com, self.target", "com, self.target").replace(
    "self.n, self.com]", "self.n, com]").replace("loss])\n        self.com.zero_()", "loss])\n        com.zero_()")

# Two buffers swapped in a captured loop (WF104) and a write-back copy (WF101), attributes both.
SIM = textwrap.dedent("""\
    import warp as wp


    @wp.kernel
    def spring_step(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.sin(x[i])


    @wp.kernel
    def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
        wp.atomic_add(loss, 0, x[wp.tid()])


    class Sim:
        def __init__(self):
            self.cur = wp.ones(8, dtype=float, requires_grad=True)
            self.nxt = wp.zeros(8, dtype=float, requires_grad=True)
            self.keep = wp.zeros(8, dtype=float, requires_grad=True)
            self.loss = wp.zeros(1, dtype=float, requires_grad=True)
            with wp.ScopedCapture() as capture:
                self.run()
            self.graph = capture.graph

        def run(self):
            self.tape = wp.Tape()
            with self.tape:
                for _ in range(3):
                    wp.launch(spring_step, dim=8, inputs=[self.cur], outputs=[self.nxt])
                    self.cur, self.nxt = self.nxt, self.cur
                wp.launch(total, dim=8, inputs=[self.cur], outputs=[self.loss])
                wp.copy(self.cur, self.keep)
            self.tape.backward(self.loss)
""")
SIM_EAGER = SIM.replace("with wp.ScopedCapture() as capture:\n            self.run()\n        self.graph = capture.graph",
                        "self.run()")


def _forced(finding: Finding) -> Finding:
    """The finding as if ``check`` had kept its safe fix (what ``apply`` did before the marker knew)."""
    return dataclasses.replace(finding, fix=Fix(FixSafety.SAFE, "fix"), data={**finding.data, "no_edit": None})


def _rebinding_findings(sources: dict[str, str]) -> list[Finding]:
    rules = ["WF101", "WF104", "WF105", "WF106"]
    return [f for f in check_sources(sources, select=rules).findings if f.rule in rules]


def test_a_zero_fill_read_in_captured_code_has_no_marker_and_says_why() -> None:
    sources = {"trainer.py": OBSERVED}
    [finding] = _rebinding_findings(sources)
    assert (finding.rule, finding.line, finding.fix.safety) == ("WF105", RESET, FixSafety.NONE)
    why = finding.data["no_edit"]
    assert why.startswith(f"line {RESET}: forward(), which the graph captured at trainer.py:27 runs, cannot rebind "
                          "self.com: each replay of the graph reruns the captured launches")
    assert why.endswith("; deleting the reset does not apply: `.com` is used at trainer.py:46, outside `forward`")
    assert finding.fix.description.endswith(f"; not automatic: {why}")
    result = compute_edits(sources, [finding])
    assert result.new_sources == {} and result.skipped == [(finding, why)]
    # the codemod agrees, in the same words: offered the fix anyway, it refuses
    forced = compute_edits(sources, [_forced(finding)])
    assert forced.new_sources == {} and [w for _, w in forced.skipped] == [why]


def test_a_dead_zero_fill_read_in_captured_code_is_deleted() -> None:
    """forward() resets `self.com` before it uses it on every call, and nothing else uses it: only the
    backward sees what the reset after the loss writes, so it goes (the only edit, the marker stays)."""
    sources = {"trainer.py": TRAINER}
    [finding] = _rebinding_findings(sources)
    assert (finding.rule, finding.line, finding.fix.safety) == ("WF105", RESET, FixSafety.SAFE)
    assert finding.data["dead_after"] == RESET - 3
    result = compute_edits(sources, [finding])
    lines = TRAINER.splitlines(keepends=True)
    assert result.new_sources == {"trainer.py": "".join(lines[: RESET - 1] + lines[RESET:])}


@pytest.mark.parametrize(("sources", "fixed"), [
    pytest.param({"trainer.py": TRAINER}, True, id="captured attribute, a dead reset"),
    pytest.param({"trainer.py": OBSERVED}, False, id="captured attribute read by the host"),
    pytest.param({"trainer.py": HELPER}, False, id="helper parameter handed back at a captured call"),
    pytest.param({"trainer.py": EAGER}, True, id="no capture"),
    pytest.param({"trainer.py": LOCAL}, True, id="local of the captured function"),
    pytest.param({"sim.py": SIM}, False, id="captured swap and copy"),
    pytest.param({"sim.py": SIM_EAGER}, True, id="swap and copy without capture"),
])
def test_the_marker_agrees_with_the_codemod(sources: dict[str, str], fixed: bool) -> None:
    findings = _rebinding_findings(sources)
    assert findings
    for finding in findings:
        forced = compute_edits(sources, [_forced(finding)])
        assert (finding.fix.safety is FixSafety.SAFE) is bool(forced.new_sources) is fixed, (finding, forced.skipped)
        if not fixed:
            assert [w for _, w in forced.skipped] == [finding.data["no_edit"]]
            assert compute_edits(sources, [finding]).new_sources == {}

