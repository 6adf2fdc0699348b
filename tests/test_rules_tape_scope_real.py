"""WF301 / WF302 / WF304 on planted bugs in Warp's own examples (nobody on the team wrote them), and the
program shapes behind them, in small programs: a trainer that captures its step in a graph when it can
and runs it eagerly otherwise, and an optimizer step moved into one of several blocks of a tape.
``check`` only: no Warp program runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_rules_real_mutants import _check, _errors, _line, _mutate, _package_file
from warpfix.finding import FixSafety, Severity
from warpfix.model.library import LibraryIndex
from warpfix.rules._tape_scope_examples import KERNELS


@pytest.fixture
def index(tmp_path: Path) -> LibraryIndex:
    return LibraryIndex(cache_dir=str(tmp_path / "summaries"))


NAVIER = "example_navier_stokes_perturbation.py"
DARCY = "example_darcy_ls_optimization.py"
ELASTIC = "example_elastic_shape_optimization.py"


# ------------------------------------------------------------------------------------------ WF301
def test_missing_zero_on_the_eager_path_of_navier_stokes(index: LibraryIndex) -> None:
    """navier_stokes runs its step from a CUDA graph when it can (the graph path zeroes the tape in a
    captured reset graph) and eagerly otherwise. With the eager path's ``self.tape.zero()`` removed, the
    persistent ``delta_omega.grad`` sums over iterations on the CPU: the graph launch on the other arm of
    ``if self.use_cuda_graph:`` does not hide it."""
    text = _package_file("warp", f"examples/optim/{NAVIER}")
    assert not _errors(_check(text, index, NAVIER))
    eager_zero = "inputs=[self.delta_omega, self.delta_omega_norm_sq, self.epsilon],\n            )\n            self.tape.zero()\n"
    buggy = _mutate(text, eager_zero, eager_zero.replace("            self.tape.zero()\n", ""))
    assert _errors(_check(buggy, index, NAVIER)) == [("WF301", _line(buggy, "self.tape.backward(self.loss)\n\n"))]


def test_the_displacement_grad_cleared_inside_a_custom_adjoint_is_no_missing_zero(index: LibraryIndex) -> None:
    """elastic_shape clears ``u.grad`` inside the ``record_func`` adjoint of its linear solve. Removing that
    zero changes ``u.grad`` after the backward, which nothing reads (the step ends with ``tape.zero()``): 30
    iterations of original and mutant give bit-identical losses and positions (measured). No error."""
    text = _package_file("warp", f"examples/fem/{ELASTIC}")
    mutant = _mutate(text, "            self._u_field.dof_values.grad.zero_()\n", "")
    assert not _errors(_check(mutant, index, ELASTIC))


_GRAPH_OR_EAGER = KERNELS + """
class Trainer:
    def __init__(self):
        self.tape = wp.Tape()
        self.use_graph = wp.get_device().is_cuda
        if self.use_graph:
            with wp.ScopedCapture() as capture:
                with self.tape:
                    self.forward()
                self.tape.backward(loss)
            self.graph = capture.graph
            self.other = capture.graph

    def forward(self):
        loss.zero_()
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])

    def step(self):
        if self.use_graph:
            wp.capture_launch(self.graph)
        else:
            self.tape = wp.Tape()
            with self.tape:
                self.forward()
            self.tape.backward(loss)
        wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
        AFTER


trainer = Trainer()
for it in range(10):
    trainer.step()
"""


@pytest.mark.parametrize(
    ("after", "reported"),
    [
        ("pass", True),  # the eager path never clears w.grad
        ("self.tape.zero()", False),
        # a graph on both arms replays what the model cannot see: the state is unknown on every path
        ("if it > 5:\n            wp.capture_launch(self.graph)\n        else:\n            wp.capture_launch(self.other)",
         False),
        ("wp.capture_launch(self.graph)", False),  # one graph launched on every path
        ("if it > 5:\n            wp.capture_launch(self.graph)", True),  # the path that skips it keeps the sum
    ],
)
def test_a_graph_launch_hides_a_missing_zero_only_on_its_own_arm(index: LibraryIndex, after: str, reported: bool) -> None:
    text = _GRAPH_OR_EAGER.replace("AFTER", after)
    errors = _errors(_check(text, index))
    assert (("WF301", _line(text, "self.tape.backward(loss)\n        wp.launch")) in errors) is reported
    assert [r for r, _ in errors if r == "WF301"] == (["WF301"] if reported else [])


# ------------------------------------------------------------------------------------------ WF302
def test_update_moved_into_the_first_tape_block_of_darcy(index: LibraryIndex) -> None:
    """darcy_ls records its tape in two blocks (the advection, then the loss). Its update
    ``v.assign(v.grad)`` moved into the first block reads the velocity adjoint before the backward:
    an optimizer step on the tape, reported once, as WF302 (not also as WF304), with a safe fix."""
    text = _package_file("warp", f"examples/fem/{DARCY}")
    assert not _errors(_check(text, index, DARCY))
    step = "        # Advect level set with velocity field adjoint\n        v.assign(v.grad)\n"
    last_in_block = '                output=p_rhs,\n            )\n'
    assert text.count(last_in_block) == 1
    buggy = _mutate(_mutate(text, step, ""), last_in_block, last_in_block + "            v.assign(v.grad)\n")
    findings = _check(buggy, index, DARCY)
    assert _errors(findings) == [("WF302", _line(buggy, "            v.assign(v.grad)\n"))]
    assert findings[0].fix.safety is FixSafety.SAFE


_STEP_IN_TAPE = KERNELS + """
tape = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        STEP
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    tape.backward(loss)
    tape.reset()
"""


def test_a_step_on_the_tape_is_one_finding_and_unsafe_to_move_when_the_loss_reads_its_output(
    index: LibraryIndex,
) -> None:
    step = "wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])"
    harmless = _STEP_IN_TAPE.replace("STEP", step)
    found = [f for f in _check(harmless, index) if f.rule in ("WF302", "WF304")]
    assert [(f.rule, f.span.line, f.fix.safety) for f in found] == [
        ("WF302", _line(harmless, step), FixSafety.SAFE)
    ]
    # the step writes `y` (through a copy of the gradient), which the loss then reads: moving it after
    # the backward would change the loss, so the fix is left to a human
    feeding = _STEP_IN_TAPE.replace("STEP", "wp.copy(y, w.grad, count=2)")
    found = [f for f in _check(feeding, index) if f.rule in ("WF302", "WF304")]
    assert [(f.rule, f.severity, f.fix.safety) for f in found] == [("WF302", Severity.ERROR, FixSafety.UNSAFE)]
    assert "reads what it writes" in found[0].message


def test_a_grad_read_inside_another_tapes_block_stays_wf304(index: LibraryIndex) -> None:
    """Read inside the block of a tape that does not produce the gradient: not a step on that tape."""
    text = KERNELS + """
tape = wp.Tape()
metrics = wp.Tape()
for it in range(20):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
    with metrics:
        print("gradient", w.grad.numpy())
    tape.backward(loss)
    tape.reset()
"""
    assert [(r, line) for r, line in _errors(_check(text, index)) if r in ("WF302", "WF304")] == [
        ("WF304", _line(text, 'print("gradient"'))
    ]
