"""WF601's truncation shape (a tape made per pass of the frame loop, one backward after it): the codemod
makes every pass record on one tape, and the WF601 command hands such findings to it."""

from __future__ import annotations

import dataclasses
import re
import textwrap

import libcst as cst
import pytest
from libcst.codemod import CodemodContext, SkipFile

from codemods import COMMANDS
from codemods.wf601_frame_tape import OneTapeOverPasses
from codemods.wf601_hoist import HoistWindowTape
from warpfix.engine import check_sources
from warpfix.fixes import compute_edits

BEFORE = textwrap.dedent(
    """\
    import warp as wp


    class Example:
        def forward_backward(self):
            self.tape = wp.Tape()
            with self.tape:
                wp.launch(assign, dim=1, inputs=[self.param], outputs=[self.states[0].q])
            for frame in range(self.frames):
                self.tape = wp.Tape()
                with self.tape:
                    self.simulate(frame)
            with self.tape:
                wp.launch(loss_kernel, dim=1, inputs=[self.states[-1].q], outputs=[self.loss])
            self.tape.backward(self.loss)
    """
)


def rewrite(code: str, **data: object) -> str:
    """The codemod at the ``with self.tape:`` block in the loop."""
    line = code[: code.index("            with self.tape:\n                self.simulate")].count("\n") + 1
    context = CodemodContext(filename="main.py", scratch={})
    command = OneTapeOverPasses(context, line=line, **data)
    return command.transform_module(cst.parse_module(code)).code


def test_the_creation_in_the_loop_goes_when_the_tape_is_made_before_it() -> None:
    after = rewrite(BEFORE, tape="self.tape", loop={"line": 9})
    assert after == BEFORE.replace("            self.tape = wp.Tape()\n            with self.tape:\n",
                                   "            with self.tape:\n")


def test_the_creation_in_the_loop_goes_when_the_tape_is_reset_before_it() -> None:
    """The blind corpus's curve_smooth: ``self.tape`` made once in ``__init__`` and reset at the top of
    ``forward()``; the passes then re-enter that one tape."""
    code = BEFORE.replace("        self.tape = wp.Tape()\n        with self.tape:\n            wp.launch(assign",
                          "        self.tape.reset()\n        with self.tape:\n            wp.launch(assign")
    after = rewrite(code, tape="self.tape", loop={"line": 9})
    assert after == code.replace("            self.tape = wp.Tape()\n            with self.tape:\n",
                                 "            with self.tape:\n")


def test_the_creation_moves_before_the_loop_when_the_block_makes_none() -> None:
    code = BEFORE.replace("        self.tape = wp.Tape()\n        with self.tape:\n            wp.launch(assign",
                          "        with other:\n            wp.launch(assign")
    after = rewrite(code)
    assert "        self.tape = wp.Tape()\n        for frame in range(self.frames):\n            with self.tape:" in after
    assert after.count("wp.Tape()") == 1


@pytest.mark.parametrize(("change", "why"), [
    (("                self.simulate(frame)\n", "                self.simulate(frame)\n            self.tape.zero()\n"),
     "runs its zero or reset"),
    (("        self.tape = wp.Tape()\n        with self.tape:\n            wp.launch(assign",
      "        with self.tape:\n            wp.launch(assign"), "used before the loop but not made in its block"),
    (("        with self.tape:\n            wp.launch(assign", "        self.tape.backward(x)\n"
      "        with self.tape:\n            wp.launch(assign"), "used between its creation and the loop"),
])
def test_shapes_it_cannot_prove_are_left_with_the_reason(change: tuple[str, str], why: str) -> None:
    code = BEFORE.replace(*change)
    assert code != BEFORE
    with pytest.raises(SkipFile, match=re.escape(why)):
        rewrite(code)


PROGRAM = textwrap.dedent(
    """\
    import warp as wp


    @wp.kernel
    def step(q: wp.array(dtype=float), p: wp.array(dtype=float), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = q[i] + p[0]


    @wp.kernel
    def total(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, q[i] * q[i])


    p = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(3):
        q = wp.zeros(4, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        for frame in range(5):
            q_next = wp.zeros(4, dtype=float, requires_grad=True)
            tape = wp.Tape()
            with tape:
                wp.launch(step, dim=4, inputs=[q, p], outputs=[q_next])
            q = q_next
        with tape:
            wp.launch(total, dim=4, inputs=[q], outputs=[loss])
        tape.backward(loss)
        p.assign(p.numpy() - 0.1 * p.grad.numpy())
        tape.zero()
    """
)


def test_check_then_apply_makes_one_tape_and_a_second_apply_changes_nothing() -> None:
    findings = [f for f in check_sources({"main.py": PROGRAM}).findings if f.rule == "WF601"]
    assert [(f.line, f.data["shape"]) for f in findings] == [(24, "tape-per-pass")]
    assert COMMANDS["WF601"].from_finding(CodemodContext(), findings[0]).__class__ is OneTapeOverPasses
    result = compute_edits({"main.py": PROGRAM}, findings)
    fixed = result.new_sources["main.py"]
    assert fixed == PROGRAM.replace("        tape = wp.Tape()\n        with tape:\n", "        with tape:\n")
    assert not [f for f in check_sources({"main.py": fixed}).findings if f.rule == "WF601"]


def test_other_wf601_findings_still_go_to_the_window_hoist() -> None:
    finding = next(f for f in check_sources({"main.py": PROGRAM}).findings if f.rule == "WF601")
    other = dataclasses.replace(finding, data={k: v for k, v in finding.data.items() if k != "shape"})
    assert COMMANDS["WF601"].from_finding(CodemodContext(), other).__class__ is HoistWindowTape


SEEDED = PROGRAM.replace(
    """p = wp.zeros(1, dtype=float, requires_grad=True)
for it in range(3):
    q = wp.zeros(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    for frame in range(5):
        q_next = wp.zeros(4, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, dim=4, inputs=[q, p], outputs=[q_next])
        q = q_next
    with tape:
        wp.launch(total, dim=4, inputs=[q], outputs=[loss])
    tape.backward(loss)
""",
    """p = wp.zeros(1, dtype=float, requires_grad=True)
costs = wp.zeros(1, dtype=float, requires_grad=True)
for it in range(3):
    q = wp.zeros(4, dtype=float, requires_grad=True)
    costs.zero_()
    tape = wp.Tape()
    for frame in range(5):
        q_next = wp.zeros(4, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, dim=4, inputs=[q, p], outputs=[q_next])
            wp.launch(total, dim=4, inputs=[q_next], outputs=[costs])
        q = q_next
        costs.grad.fill_(1.0)
        tape.backward()
""",
)


def test_a_seeded_backward_per_window_moves_after_the_loop_on_one_tape() -> None:
    """newton's drone shape: every window adds its costs into one array and seeds the backward through its
    .grad; one tape over the windows and one seeded backward after them give the episode's gradient."""
    assert SEEDED != PROGRAM
    findings = [f for f in check_sources({"main.py": SEEDED}).findings if f.rule == "WF601"]
    assert [(f.line, f.data["seeds"]) for f in findings] == [(30, ["costs"])]  # the backward
    fixed = compute_edits({"main.py": SEEDED}, findings).new_sources["main.py"]
    assert fixed == SEEDED.replace("        tape = wp.Tape()\n        with tape:\n", "        with tape:\n").replace(
        "        q = q_next\n        costs.grad.fill_(1.0)\n        tape.backward()\n",
        "        q = q_next\n    costs.grad.fill_(1.0)\n    tape.backward()\n")
    assert not [f for f in check_sources({"main.py": fixed}).findings if f.rule == "WF601"]


def test_a_seed_the_window_overwrites_is_no_sum_of_the_windows() -> None:
    overwritten = SEEDED.replace("wp.atomic_add(loss, 0, q[i] * q[i])", "loss[0] = q[i] * q[i]")
    assert overwritten != SEEDED
    findings = [f for f in check_sources({"main.py": overwritten}).findings if f.rule == "WF601"]
    assert [f.data["seeds"] for f in findings] == [[]]
    assert COMMANDS["WF601"].from_finding(CodemodContext(), findings[0]).__class__ is HoistWindowTape


SETUP = textwrap.dedent(
    """\
    import warp as wp


    @wp.kernel
    def launch_speed(v0: wp.array(dtype=float), q: wp.array(dtype=float)):
        i = wp.tid()
        q[i] = v0[0] * float(i)


    @wp.kernel
    def step(q: wp.array(dtype=float), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = q[i] * q[i] * 0.5 + 0.1


    @wp.kernel
    def total(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, q[i])


    def simulate(qs, v0):
        # the initial state, from the trained launch speed
        wp.launch(launch_speed, dim=4, inputs=[v0], outputs=[qs[0]])
        for t in range(5):
            tape = wp.Tape()
            with tape:
                wp.launch(step, dim=4, inputs=[qs[t]], outputs=[qs[t + 1]])
        return tape


    v0 = wp.array([1.0], dtype=float, requires_grad=True)
    qs = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(6)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(3):
        loss.zero_()
        tape = simulate(qs, v0)
        with tape:
            wp.launch(total, dim=4, inputs=[qs[5]], outputs=[loss])
        tape.backward(loss)
        v0.assign(v0.numpy() - 0.1 * v0.grad.numpy())
        tape.zero()
    """
)


def test_the_set_up_launch_that_feeds_the_first_pass_from_a_parameter_is_recorded_on_the_one_tape() -> None:
    """bola_toss (blind corpus): the initial velocity is launched from the trained parameter before the frame
    loop, on no tape. One tape over the passes alone would still leave that parameter's gradient zero."""
    (finding,) = [f for f in check_sources({"main.py": SETUP}).findings if f.rule == "WF601"]
    assert finding.data["setup_lines"] == [24]
    fixed = compute_edits({"main.py": SETUP}, [finding]).new_sources["main.py"]
    assert fixed == SETUP.replace(
        "    # the initial state, from the trained launch speed\n"
        "    wp.launch(launch_speed, dim=4, inputs=[v0], outputs=[qs[0]])\n"
        "    for t in range(5):\n"
        "        tape = wp.Tape()\n",
        "    tape = wp.Tape()\n"
        "    # the initial state, from the trained launch speed\n"  # the set-up's comment stays on it
        "    with tape:\n"
        "        wp.launch(launch_speed, dim=4, inputs=[v0], outputs=[qs[0]])\n"
        "    for t in range(5):\n")
    assert not [f for f in check_sources({"main.py": fixed}).findings if f.rule == "WF601"]


def test_a_set_up_launch_that_is_no_statement_of_the_loops_block_is_left_with_the_reason() -> None:
    code = SETUP.replace("    wp.launch(launch_speed, dim=4, inputs=[v0], outputs=[qs[0]])\n",
                         "    if v0.shape[0]:\n        wp.launch(launch_speed, dim=4, inputs=[v0], outputs=[qs[0]])\n")
    (finding,) = [f for f in check_sources({"main.py": code}).findings if f.rule == "WF601"]
    result = compute_edits({"main.py": code}, [finding])
    assert not result.new_sources
    assert "not one run of statements before the loop" in str(result.skipped)
