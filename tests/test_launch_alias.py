"""WF106 at a launch passing one array as an input its kernel reads and as the output it overwrites:
the fresh output is safe only when each thread reads its own element, before storing it unconditionally."""

from __future__ import annotations

import pytest

from warpfix.engine import check_sources
from warpfix.finding import FixSafety

_PROGRAM = """
import warp as wp


@wp.kernel
def advance(w: wp.array(dtype=float), k: wp.array(dtype=float), w_out: wp.array(dtype=float)):
    i = wp.tid()
{body}


@wp.kernel
def energy(w: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, w[i] * w[i])


k = wp.ones(8, dtype=float, requires_grad=True)
w = wp.full(8, 0.5, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    for t in range(3):
        wp.launch(advance, dim=8, inputs=[w, k], outputs=[w])
    wp.launch(energy, dim=8, inputs=[w], outputs=[loss])
tape.backward(loss)
"""


@pytest.mark.parametrize(
    ("body", "safety"),
    [
        ("    x = w[i]\n    w_out[i] = x - 0.1 * k[i] * wp.sin(x)", FixSafety.SAFE),
        ("    x = w[i]\n    w_out[i] = x - 0.1 * k[i] * wp.sin(w[(i + 1) % 8])", FixSafety.NONE),  # a neighbour
        ("    x = w[i]\n    if x > 0.2:\n        w_out[i] = x - 0.1 * k[i] * wp.sin(x)", FixSafety.NONE),  # conditional
    ],
    ids=["own-element", "neighbour-read", "conditional-store"],
)
def test_launch_alias_fix_safety(body: str, safety: FixSafety) -> None:
    text = _PROGRAM.format(body=body)
    result = check_sources({"main.py": text}, select=["WF106"])
    assert not result.errors, result.errors
    launch = next(n for n, line in enumerate(text.splitlines(), 1) if "outputs=[w]" in line)
    found = [(f.line, f.fix.safety, f.data.get("alias")) for f in result.findings]
    assert found == [(launch, safety, "w")]


_ONE_LAUNCH = """
import warp as wp


@wp.kernel
def act(z: wp.array2d(dtype=float), h: wp.array2d(dtype=float)):
    i, j = wp.tid()
    h[i, j] = wp.tanh(z[i, j])


@wp.kernel
def total(h: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(loss, 0, h[i, j])


z = wp.full((4, 3), 0.5, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(act, dim=z.shape, inputs=[z], outputs=[{out}])
    wp.launch(total, dim=z.shape, inputs=[z], outputs=[loss])
tape.backward(loss)
"""


@pytest.mark.parametrize(("out", "found"), [("z", True), ("wp.zeros_like(z)", False)])
def test_one_launch_reading_the_array_it_overwrites_is_reported(out: str, found: bool) -> None:
    """An activation launched in place (``inputs=[z], outputs=[z]``, the only launch touching ``z`` before the
    loss): its own read is the one the replay gets wrong, with no earlier reader. 2-D elements (``i, j =
    wp.tid()``) are the thread's own, so the fresh output is safe."""
    text = _ONE_LAUNCH.format(out=out)
    result = check_sources({"main.py": text}, select=["WF106"])
    got = [(f.line, f.fix.safety, f.data.get("alias")) for f in result.findings]
    launch = next(n for n, line in enumerate(text.splitlines(), 1) if "wp.launch(act" in line)
    assert got == ([(launch, FixSafety.SAFE, "z")] if found else [])
