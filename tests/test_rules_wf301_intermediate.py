"""WF301 on an intermediate the tape only accumulates into: the adjoint the backward leaves in its
``.grad`` (no store clears it) reaches the next backward unless something zeroes it."""

from __future__ import annotations

import pytest

from warpfix.engine import check_sources
from warpfix.finding import FixSafety
from warpfix.rules.wf301_missing_zero import _POOLED

LOOP = """
{setup}
for it in range(20):
    pooled.zero_()
    w.grad.zero_()
{zero_before}
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(pool, dim=32, inputs=[y], outputs=[pooled])
        wp.launch(square, dim=1, inputs=[pooled], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
{zero_after}
"""


def _wf301(setup: str, zero_before: str, zero_after: str) -> list[str]:
    code = _POOLED + LOOP.format(setup=setup, zero_before=zero_before, zero_after=zero_after)
    return [f.message for f in check_sources({"main.py": code}, select=["WF301"]).findings]


@pytest.mark.parametrize(
    ("setup", "zero_before", "zero_after"),
    [
        ("", "    pooled.grad.zero_()\n    tape = wp.Tape()", ""),  # the intermediate's gradient zeroed by hand
        ("tape = wp.Tape()", "", "    tape.reset()"),  # one tape, reset every iteration
    ],
    ids=["grad-zeroed", "tape-reset"],
)
def test_an_intermediate_gradient_cleared_each_iteration_is_no_finding(
    setup: str, zero_before: str, zero_after: str
) -> None:
    assert _wf301(setup, zero_before, zero_after) == []


def test_an_intermediate_gradient_left_over_names_the_array() -> None:
    (message,) = _wf301("", "    tape = wp.Tape()", "")
    assert "`pooled.grad`" in message and "only accumulates" in message


def test_a_loss_a_launch_reads_after_accumulating_into_it_is_no_finding() -> None:
    """The backward seeds the loss's gradient itself (fill with 1), whatever the previous one left there."""
    code = _POOLED + """
@wp.kernel
def scaled(loss: wp.array(dtype=float), out: wp.array(dtype=float)):
    out[0] = 0.5 * loss[0]


report = wp.zeros(1, dtype=float, requires_grad=True)
for it in range(20):
    loss.zero_()
    w.grad.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
        wp.launch(scaled, dim=1, inputs=[loss], outputs=[report])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
"""
    assert [f.message for f in check_sources({"main.py": code}, select=["WF301"]).findings] == []


def _findings(code: str) -> list:
    return check_sources({"main.py": code}, select=["WF301"]).findings


def test_the_intermediate_finding_offers_the_safe_fix_and_names_the_array_for_the_zero_before_backward() -> None:
    (finding,) = _findings(_POOLED + LOOP.format(setup="", zero_before="    tape = wp.Tape()", zero_after=""))
    assert finding.fix.safety is FixSafety.SAFE
    assert finding.data["intermediate"] is True and finding.data["arrays"] == ["pooled"]


def test_an_intermediate_accumulated_in_a_helper_is_reported_without_its_helper_local_name() -> None:
    """The launch that pools sits in a helper whose parameter is ``acc``: ``acc`` names nothing where the
    backward runs, so the fix may clear the tape but must not write ``acc.grad.zero_()`` there."""
    code = _POOLED + """

def pool_into(values, acc):
    wp.launch(pool, dim=32, inputs=[values], outputs=[acc])


for it in range(20):
    pooled.zero_()
    w.grad.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
        pool_into(y, pooled)
        wp.launch(square, dim=1, inputs=[pooled], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
"""
    (finding,) = _findings(code)
    assert "`acc.grad`" in finding.message  # named as the launch passed it
    assert finding.fix.safety is FixSafety.SAFE and finding.data["arrays"] == []


SUMMED = _POOLED + """
for it in range(20):
    w.grad.zero_()
    for batch in range(3):  # the parameter's gradient is summed over the batches on purpose
        pooled.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
{pool}
            wp.launch(square, dim=1, inputs=[pooled], outputs=[loss])
        tape.backward(loss)
    wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])
"""


def test_with_parameter_gradients_summed_over_backwards_only_the_named_intermediate_is_zeroed(
        tmp_path, monkeypatch) -> None:
    """``tape.zero()`` anywhere in the batch loop would clear ``w.grad``'s sum too: the fix zeroes
    ``pooled.grad`` just before the backward, and nothing else."""
    from warpfix.apply import Selection, plan_fixes

    code = SUMMED.format(pool="            wp.launch(pool, dim=32, inputs=[y], outputs=[pooled])")
    (finding,) = _findings(code)
    assert finding.data["arrays_only"] is True and finding.data["arrays"] == ["pooled"]
    assert "`tape.zero()` would clear" in finding.message
    (tmp_path / "main.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    result = plan_fixes(["."], selection=Selection(select=["WF301"], use_cache=False))
    (fixed,) = result.changed.values()
    assert fixed == code.replace("        tape.backward(loss)\n", "        pooled.grad.zero_()\n        tape.backward(loss)\n")


def test_with_summed_parameter_gradients_and_no_local_name_there_is_no_fix() -> None:
    code = SUMMED.format(pool="            pool_into(y, pooled)") + """

def pool_into(values, acc):
    wp.launch(pool, dim=32, inputs=[values], outputs=[acc])
"""
    code = code.replace("for it in range(20):", "def pool_into(values, acc):\n"
                        "    wp.launch(pool, dim=32, inputs=[values], outputs=[acc])\n\n\nfor it in range(20):", 1)
    code = code[: code.rindex("\n\ndef pool_into")] + "\n"
    (finding,) = _findings(code)
    assert finding.data["arrays"] == [] and finding.fix.safety is FixSafety.NONE


def test_zeroing_a_fresh_tape_before_its_backward_clears_nothing() -> None:
    """Warp's ``Tape.zero`` clears the gradients the tape's backwards registered: before the first
    backward of a tape made this iteration there are none, and ``pooled.grad`` keeps the old adjoint."""
    code = _POOLED + LOOP.format(setup="", zero_before="    tape = wp.Tape()", zero_after="")
    code = code.replace("    tape.backward(loss)\n", "    tape.zero()\n    tape.backward(loss)\n")
    (message,) = [f.message for f in _findings(code)]
    assert "`pooled.grad`" in message
