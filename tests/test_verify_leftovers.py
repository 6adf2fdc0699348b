"""The leftover-gradient check (warpfix.verify.leftovers) on Warp arrays, without the probe: a gradient
consumed, not zeroed, summed into by the next backward and consumed again is reported at that read; a
gradient accumulated on purpose (not read in between), zeroed, or seeded by hand is not."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from warpfix.verify.leftovers import Leftovers

wp = pytest.importorskip("warp")


def _setup() -> tuple[Leftovers, list, object, object]:
    found: list = []
    checks = Leftovers(lambda path, line, msg, data: found.append((path, line, data["array"], msg)), lambda _a: "x")
    x = wp.zeros(4, dtype=float, requires_grad=True, device="cpu")
    tape = SimpleNamespace(gradients={x: x.grad})
    return checks, found, x, tape


def _backward(checks: Leftovers, tape, x, line: int) -> None:
    """A backward that adds 1 into x.grad."""
    checks.before_backward()
    x.grad.assign(x.grad.numpy() + 1.0)
    checks.after_backward(tape, f"main.py:{line}", lambda v: isinstance(v, wp.array))


def test_a_consumed_gradient_summed_into_is_reported_at_its_next_read() -> None:
    checks, found, x, tape = _setup()
    _backward(checks, tape, x, 10)
    checks.read([x.grad.flatten()], lambda: ("main.py", 12))  # consumed (a view of the gradient)
    _backward(checks, tape, x, 10)
    assert found == []
    checks.read([x.grad], lambda: ("main.py", 12))
    assert [(p, line, a) for p, line, a, _ in found] == [("main.py", 12, "x")]
    assert "earlier run of that backward" in found[0][3]


@pytest.mark.parametrize("between", ["nothing", "zero", "seed"])
def test_accumulation_on_purpose_a_zero_or_a_hand_seed_is_no_leftover(between: str) -> None:
    checks, found, x, tape = _setup()
    _backward(checks, tape, x, 10)
    if between != "nothing":  # read, then cleared or overwritten
        checks.read([x.grad], lambda: ("main.py", 12))
        x.grad.zero_() if between == "zero" else x.grad.assign(np.full(4, 3.0))
    _backward(checks, tape, x, 10)
    checks.read([x.grad], lambda: ("main.py", 12))
    assert found == []
