"""Loop unrolling in the host model: enough consecutive iterations for buffers reused in turn to show
(a state list repeating two buffers, ``states[t % k]``), over long, unknown and huge trip counts, and
a copy into such a buffer reported as the ping-pong it is. ``check`` only: no Warp program runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpfix.engine import parse_file, run_rules
from warpfix.finding import Finding, Severity
from warpfix.model import build_project
from warpfix.model.host.syntax import _passes
from warpfix.model.library import LibraryIndex


@pytest.fixture
def index(tmp_path: Path) -> LibraryIndex:
    return LibraryIndex(cache_dir=str(tmp_path / "summaries"))


def _errors(text: str, index: LibraryIndex) -> list[tuple[str, int]]:
    src, err = parse_file("prog.py", text)
    assert src is not None, err
    findings: list[Finding] = run_rules(build_project({"prog.py": src}, library=index))
    return [(f.rule, f.span.line) for f in findings if f.severity is Severity.ERROR]


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


_KERNELS = '''
import warp as wp

@wp.kernel
def step(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i] * k[0]

@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])
'''

# the benchmark's ping-pong mutant: after the initial state, the list repeats two buffers
_POOL = _KERNELS + '''
def run(n_states, n_steps):
    k = wp.ones(1, dtype=float, requires_grad=True)
    states = [wp.ones(4, dtype=float, requires_grad=True) for _ in range(n_states)]
    states = [states[0]] + [states[1 + i % 2] for i in range(len(states) - 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(n_steps):
            wp.launch(step, dim=4, inputs=[states[t], k], outputs=[states[t + 1]])
        wp.launch(total, dim=4, inputs=[states[-1]], outputs=[loss])
    tape.backward(loss)
'''


@pytest.mark.parametrize("steps", [30, 1920], ids=["30-steps", "cloth-1920-steps"])
def test_a_state_list_repeating_two_buffers_is_a_ping_pong_over_a_long_loop(steps: int, index: LibraryIndex) -> None:
    """Step 0 writes buffer a, step 1 reads it, step 2 overwrites it: iterations 0, 1 and n - 1 alone
    never show that. 1920 steps is newton's cloth example (120 frames of 16 substeps)."""
    text = _POOL + f"\nrun({steps + 1}, {steps})\n"
    assert ("WF104", _line(text, "wp.launch(step")) in _errors(text, index)
    fresh = text.replace("    states = [states[0]] + [states[1 + i % 2] for i in range(len(states) - 1)]\n", "")
    assert _errors(fresh, index) == []


def test_a_state_list_repeating_two_buffers_is_a_ping_pong_when_no_length_is_known(index: LibraryIndex) -> None:
    """Trip count and list length from the caller (command-line arguments): the comprehension's first
    elements are taken at the ``+``, and the loop runs three passes."""
    text = _POOL + "\nimport sys\nrun(int(sys.argv[1]) + 1, int(sys.argv[1]))\n"
    assert ("WF104", _line(text, "wp.launch(step")) in _errors(text, index)


_ROTATION = _KERNELS + '''
def run(n_steps):
    k = wp.ones(1, dtype=float, requires_grad=True)
    states = [wp.ones(4, dtype=float, requires_grad=True) for _ in range(4)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(n_steps):
            wp.launch(step, dim=4, inputs=[states[t % 4], k], outputs=[states[(t + 1) % 4]])
        wp.launch(total, dim=4, inputs=[states[0]], outputs=[loss])
    tape.backward(loss)

import sys
run(int(sys.argv[1]))
'''


def test_a_rotation_of_four_buffers_runs_enough_iterations(index: LibraryIndex) -> None:
    """``states[t % 4]``: buffer 0 is read at step 0 and overwritten at step 3, a pass that three
    iterations never reach when the trip count is unknown."""
    assert ("WF104", _line(_ROTATION, "wp.launch(step")) in _errors(_ROTATION, index)


def test_a_rotation_outside_any_tape_is_no_error(index: LibraryIndex) -> None:
    untaped = _ROTATION.replace("    with tape:\n", "    if True:\n").replace("    tape.backward(loss)\n", "")
    assert _errors(untaped, index) == []


_COPY = _KERNELS + '''
def run(n_steps):
    k = wp.ones(1, dtype=float, requires_grad=True)
    scratch = wp.zeros(4, dtype=float, requires_grad=True)
    states = [wp.ones(4, dtype=float, requires_grad=True) for _ in range(3)]
    states = [states[0]] + [states[1 + i % 2] for i in range(n_steps)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(n_steps):
            wp.launch(step, dim=4, inputs=[states[t], k], outputs=[scratch])
            wp.copy(states[t + 1], scratch)
        wp.launch(total, dim=4, inputs=[states[-1]], outputs=[loss])
    tape.backward(loss)

run(10)
'''


def test_a_copy_into_a_buffer_used_in_turn_is_a_ping_pong_not_a_copy_writeback(index: LibraryIndex) -> None:
    """navier_stokes' shape: each step ends with ``wp.copy(states[t + 1], result)``. Into a slot that
    holds the buffer two steps back, the buffer reuse is the bug (WF104); a copy back into the buffer
    the same step read stays WF101."""
    copy = _line(_COPY, "wp.copy(")
    assert _errors(_COPY, index) == [("WF104", copy)]
    writeback = _COPY.replace("wp.copy(states[t + 1], scratch)", "wp.copy(states[t], scratch)")
    assert ("WF101", copy) in _errors(writeback, index)


def test_passes_of_a_known_trip_count() -> None:
    assert _passes(10, 3) == [0, 1, 2, 9]
    assert _passes(4, 3) == [0, 1, 2, 3]
    assert _passes(10, 5) == [0, 1, 2, 3, 4, 9]
    assert _passes(10, 1) == [0]
    assert _passes(0, 3) == []
