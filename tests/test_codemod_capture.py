"""Rebinding codemods under graph capture (issue 10): a replay of a captured graph reruns the
captured launches on the arrays of its capture, never the Python rebinding a fix adds, so a
rebinding site a capture runs is refused with the reason (``warpfix.model.capture``); the same code
outside any capture is still fixed. Static: the programs are rewritten, not run."""

from __future__ import annotations

import textwrap

import pytest

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.fixes import compute_edits
from warpfix.model.capture import captured_functions


def finding(rule: str, path: str, line: int, **data: object) -> Finding:
    return Finding(rule=rule, name=rule.lower(), severity=Severity.ERROR, span=Span(path, line, 1, line, 2),
                   message="m", fix=Fix(FixSafety.SAFE, "fix"), data=data)


KERNEL = textwrap.dedent("""\
    import warp as wp


    @wp.kernel
    def squash(x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = wp.tanh(x[i])
""")
STORE = 7

CLASS = KERNEL + textwrap.dedent("""\


    class Trainer:
        def __init__(self, x, capture):
            self.x = x
            self.graph = None
            if capture:
                with wp.ScopedCapture() as cap:
                    self.forward_backward()
                self.graph = cap.graph

        def forward_backward(self):
            self.tape = wp.Tape()
            with self.tape:
                self.forward()

        def forward(self):
            wp.launch(squash, dim=4, inputs=[self.x])
""")

BEGIN_END = KERNEL + textwrap.dedent("""\


    x = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    wp.capture_begin()
    with tape:
        wp.launch(squash, dim=4, inputs=[x])
    graph = wp.capture_end()
""")

HELPER = KERNEL + textwrap.dedent("""\


    def step(state):
        wp.launch(squash, dim=4, inputs=[state.x])
""")

MAIN = textwrap.dedent("""\
    import warp as wp

    from sim import step

    with wp.ScopedCapture() as cap:
        with wp.Tape():
            step(state)
""")


@pytest.mark.parametrize(("sources", "why"), [
    pytest.param({"sim.py": CLASS}, "forward(), which the graph captured at sim.py:15 runs, cannot rebind self.x",
                 id="method called from a ScopedCapture"),
    pytest.param({"sim.py": BEGIN_END}, "the graph captured at line 12 cannot rebind x", id="capture_begin/end"),
    pytest.param({"sim.py": HELPER, "main.py": MAIN}, "step(), which the graph captured at main.py:5 runs",
                 id="helper of another file"),
])
def test_a_rebinding_a_capture_runs_is_refused(sources: dict[str, str], why: str) -> None:
    result = compute_edits(sources, [finding("WF106", "sim.py", STORE)])
    assert result.new_sources == {}
    [(_, reason)] = result.skipped
    assert why in reason and "each replay of the graph reruns the captured launches" in reason


def test_the_same_code_without_a_capture_is_fixed() -> None:
    eager = CLASS.replace("with wp.ScopedCapture() as cap:", "if True:").replace("cap.graph", "None")
    result = compute_edits({"sim.py": eager}, [finding("WF106", "sim.py", STORE)])
    assert result.skipped == []
    assert "        self.x = x_out\n" in result.new_sources["sim.py"]


def test_a_local_of_a_captured_function_is_fixed() -> None:
    """A local name lives for one run of the function: all its later uses are captured too, on the
    arrays the capture saw, so rebinding it is right on the graph path as well."""
    local = CLASS.replace("wp.launch(squash, dim=4, inputs=[self.x])",
                          "x = wp.zeros(4, dtype=float, requires_grad=True)\n"
                          "        wp.launch(squash, dim=4, inputs=[x])\n        self.y = x")
    result = compute_edits({"sim.py": local}, [finding("WF106", "sim.py", STORE)])
    assert result.skipped == []
    assert "        x = x_out\n        self.y = x\n" in result.new_sources["sim.py"]


def test_wf103_rotation_in_a_captured_function_is_refused() -> None:
    text = textwrap.dedent("""\
        import warp as wp


        def step(state):
            state.a = state.b


        with wp.ScopedCapture() as cap:
            step(None)
    """)
    result = compute_edits({"sim.py": text}, [finding("WF103", "sim.py", 5)])
    [(_, reason)] = result.skipped
    assert "step(), which the graph captured at sim.py:8 runs, cannot rebind state.b" in reason


def test_captured_functions_follow_calls_by_name_across_files() -> None:
    found = captured_functions({"a.py": MAIN, "sim.py": HELPER + "\n\ndef unused():\n    pass\n"})
    assert found == {"step": ("a.py", 5), "Tape": ("a.py", 5), "launch": ("a.py", 5)}
    assert captured_functions({"sim.py": HELPER}) == {}  # no capture anywhere
