"""``warpfix.model.dead_reset``: a reset is dead only where nothing but the backward can see what it writes."""

from __future__ import annotations

import ast
import textwrap

import pytest

from warpfix.model.dead_reset import covering_reset, is_reset
from warpfix.model.source import SourceFile

TRAINER = textwrap.dedent("""\
    import warp as wp


    class Trainer:
        def __init__(self):
            self.com = wp.zeros(1, dtype=float, requires_grad=True)

        def forward(self):
            with wp.ScopedDevice("cpu"):
                self.com.zero_()
            wp.launch(com_kernel, dim=8, inputs=[self.q, self.com])
            wp.launch(loss_kernel, dim=1, inputs=[self.com], outputs=[self.loss])
            self.com.zero_()  # the dead reset

        def step(self):
            self.tape.zero()
            print(self.com.grad)
""")


def _covering(files: dict[str, str]) -> tuple[int | None, str]:
    """``covering_reset`` of the reset marked ``# the dead reset`` in ``trainer.py``."""
    sources = {path: SourceFile.parse(path, text) for path, text in files.items()}
    src = sources["trainer.py"]
    line = next(i for i, row in enumerate(src.lines, 1) if row.endswith("# the dead reset"))
    [call] = [c for c in src.nodes_of(ast.Call) if c.lineno == line and is_reset(c)]
    return covering_reset(sources, src, call)


def test_a_reset_the_method_repeats_before_any_use_is_dead() -> None:
    assert _covering({"trainer.py": TRAINER}) == (10, "")


@pytest.mark.parametrize(("old", "new", "why"), [
    pytest.param("    def step(self):\n", "    def step(self):\n        print(self.com.numpy())\n",
                 "`.com` is used at trainer.py:16, outside `forward`", id="a host read in another method"),
    pytest.param("with wp.ScopedDevice(\"cpu\"):", "if self.q is not None:",
                 "`forward` does not reset `self.com` on every call before it first uses it, nor does a reset follow "
                 "it before the next use", id="a conditional reset"),
    pytest.param("        self.com.zero_()  # the dead reset\n",
                 "        self.com.zero_()  # the dead reset\n        wp.launch(k, dim=1, inputs=[self.com])\n",
                 "`self.com` is used after the reset in `forward`", id="used after the reset"),
    pytest.param("inputs=[self.q, self.com]", "inputs=[self.q, self.com], dim=len(self.com)",
                 "`self.com` at line 11 is used other than by a launch or a reset", id="another use in the method"),
    pytest.param("        self.com = wp.zeros(", "        self.other = self.com\n        self.com = wp.zeros(",
                 "`.com` is used at trainer.py:6, outside `forward`", id="an alias of the array"),
    pytest.param("        self.com.zero_()  # the dead reset\n",
                 "        for _ in range(2):\n            self.com.zero_()  # the dead reset\n",
                 "the reset is inside a loop of `forward`", id="a reset in a loop"),
    pytest.param("    def step(self):\n", "    def step(self):\n        getattr(self, 'com')\n",
                 "`getattr` names `com` at trainer.py:16", id="reflection"),
])
def test_a_reset_whose_contents_may_be_read_is_not_dead(old: str, new: str, why: str) -> None:
    assert old in TRAINER
    assert _covering({"trainer.py": TRAINER.replace(old, new)}) == (None, why)


def test_another_file_reading_the_attribute_keeps_the_reset() -> None:
    other = "def report(trainer):\n    return trainer.com.numpy()\n"
    assert _covering({"trainer.py": TRAINER, "report.py": other}) == (
        None, "`.com` is used at report.py:2, outside `forward`")


# In the shape of newton's example_diffsim_soft_body.py: forward() accumulates into `self.com` without
# resetting it first, and step() resets it after the backward, before the next forward().
SOFT_BODY = textwrap.dedent("""\
    import warp as wp


    @wp.kernel
    def com_kernel(q: wp.array(dtype=float), com: wp.array(dtype=float)):
        wp.atomic_add(com, 0, q[wp.tid()])


    @wp.kernel
    def loss_kernel(com: wp.array(dtype=float), loss: wp.array(dtype=float)):
        loss[0] = com[0] * com[0]


    class Example:
        def __init__(self):
            self.q = wp.ones(8, dtype=float, requires_grad=True)
            self.com = wp.array([0.0], dtype=float, requires_grad=True)
            self.loss = wp.zeros(1, dtype=float, requires_grad=True)

        def forward_backward(self):
            self.tape = wp.Tape()
            with self.tape:
                self.forward()
            self.tape.backward(self.loss)

        def forward(self):
            wp.launch(com_kernel, dim=8, inputs=[self.q], outputs=[self.com])
            wp.launch(loss_kernel, dim=1, inputs=[self.com], outputs=[self.loss])
            self.com.zero_()  # the dead reset

        def step(self):
            self.forward_backward()
            self.tape.zero()
            self.loss.zero_()
            self.com.zero_()


    example = Example()
    for _ in range(3):
        example.step()
""")


def _wf105_data(text: str) -> dict:
    from warpfix.engine import check_sources

    [finding] = [f for f in check_sources({"trainer.py": text}, select=["WF105"]).findings]
    assert finding.line == next(i for i, row in enumerate(text.splitlines(), 1) if row.endswith("# the dead reset"))
    return finding.data


def test_a_reset_that_follows_in_another_method_makes_the_reset_dead() -> None:
    step_reset = SOFT_BODY.splitlines().index("        self.com.zero_()") + 1
    assert _wf105_data(SOFT_BODY)["dead_after"] == step_reset


@pytest.mark.parametrize(("old", "new"), [
    pytest.param("        self.com.zero_()\n\n\nexample", "        if self.loss is None:\n            self.com.zero_()\n\n\nexample",
                 id="the later reset is conditional"),
    pytest.param("        self.com.zero_()\n\n\nexample", "\n\nexample", id="no later reset"),
    pytest.param("        self.forward_backward()\n", "        self.forward_backward()\n        self.forward()\n",
                 id="the next forward reads the zeros"),
])
def test_a_reset_no_unconditional_reset_follows_is_not_dead(old: str, new: str) -> None:
    assert old in SOFT_BODY
    data = _wf105_data(SOFT_BODY.replace(old, new))
    assert "dead_after" not in data
    assert data["dead_refused"] == ("`forward` does not reset `self.com` on every call before it first uses it, "
                                    "nor does a reset follow it before the next use")


# In the shape of newton's example_diffsim_bear.py: one centre of mass per frame, a list built in
# __init__, forward(frame) accumulates into its element and step() resets every element in a loop.
BEAR = textwrap.dedent("""\
    import warp as wp


    @wp.kernel
    def com_kernel(q: wp.array(dtype=float), com: wp.array(dtype=float)):
        wp.atomic_add(com, 0, q[wp.tid()])


    @wp.kernel
    def loss_kernel(com: wp.array(dtype=float), loss: wp.array(dtype=float)):
        wp.atomic_add(loss, 0, com[0] * com[0])


    class Example:
        def __init__(self):
            self.q = wp.ones(8, dtype=float, requires_grad=True)
            self.coms = []
            for _ in range(3):
                self.coms.append(wp.zeros(1, dtype=float, requires_grad=True))
            self.loss = wp.zeros(1, dtype=float, requires_grad=True)

        def forward_backward(self):
            self.tape = wp.Tape()
            with self.tape:
                for i in range(3):
                    self.forward(i)
            self.tape.backward(self.loss)

        def forward(self, frame):
            wp.launch(com_kernel, dim=8, inputs=[self.q], outputs=[self.coms[frame]])
            wp.launch(loss_kernel, dim=1, inputs=[self.coms[frame]], outputs=[self.loss])
            self.coms[frame].zero_()  # the dead reset

        def step(self):
            self.forward_backward()
            self.tape.zero()
            self.loss.zero_()
            for i in range(3):
                self.coms[i].zero_()


    example = Example()
    for _ in range(3):
        example.step()
""")


def test_a_reset_of_a_list_element_that_a_loop_resets_later_is_dead() -> None:
    loop_reset = BEAR.splitlines().index("            self.coms[i].zero_()") + 1  # in step()
    assert _wf105_data(BEAR)["dead_after"] == loop_reset


@pytest.mark.parametrize(("old", "new", "why"), [
    pytest.param("        for i in range(3):\n            self.coms[i].zero_()\n",
                 "        for com in self.coms:\n            com.zero_()\n",
                 "`.coms` is used at trainer.py:38, outside `forward`", id="the list iterated"),
    pytest.param("inputs=[self.coms[frame]], outputs=[self.loss]",
                 "inputs=[self.coms[frame], self.coms[frame - 1]], outputs=[self.loss]",
                 "`self.coms[frame - 1]` at line 31 is not used as `self.coms[frame]` is",
                 id="the previous frame's element read"),
    pytest.param("outputs=[self.coms[frame]]", "outputs=[self.coms[0]]",
                 "`self.coms[0]` at line 30 is not used as `self.coms[frame]` is", id="another element written"),
])
def test_a_reset_of_a_list_element_read_otherwise_is_not_dead(old: str, new: str, why: str) -> None:
    assert old in BEAR
    assert _wf105_data(BEAR.replace(old, new))["dead_refused"] == why
