"""Issue 11: `apply` makes no edit that breaks the program's own checks (warpfix.model.pinned).

On the warp-lang wheel, 4 of the 6 edits `apply` made broke Warp's own tests: two WF501 fixes
dropped `retain_grad=True` in tests asserting the retained (double-counted) gradient, and two
overwrite fixes in `test_overwrite.py`, which turns on Warp's overwrite detector and asserts its
report. Such code keeps its diagnostic and gets no automatic edit; the same code in a script is
still fixed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from warpfix.apply import plan_fixes
from warpfix.engine import check_paths
from warpfix.finding import Severity

RETAIN = '''\
import numpy as np
import warp as wp


@wp.kernel
def twice(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def thrice(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 3.0 * x[i]


def {name}():
    x_a = wp.ones(4, dtype=float, requires_grad=True)
    x_b = wp.ones(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True, retain_grad=True)
    with wp.Tape() as tape:
        wp.launch(twice, dim=4, inputs=[x_a, y])
        wp.launch(thrice, dim=4, inputs=[x_b, y])
    tape.backward(grads={{y: wp.ones_like(y)}})
    got = x_a.grad.numpy()
{check}


{name}()
'''
ASSERT = "    np.testing.assert_allclose(got, np.full(4, 2.0))"
PRINT = "    print(got)"

DETECTOR = '''\
import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def run():
{switch}
    a = wp.ones(4, dtype=float, requires_grad=True)
    b = wp.zeros_like(a)
    c = wp.ones(4, dtype=float, requires_grad=True)
    with wp.Tape():
        wp.launch(square, dim=4, inputs=[a], outputs=[b])
        wp.launch(square, dim=4, inputs=[c], outputs=[a])


run()
'''


def _kept(tmp_path: Path, filename: str, text: str) -> tuple[list[str], list[str]]:
    path = tmp_path / filename
    path.write_text(text)
    planned = plan_fixes([str(path)], unsafe=True)
    return [e.finding.rule for e in planned.edits if e.kept], [e.reason for e in planned.edits if not e.kept]


def test_a_test_asserting_on_gradients_gets_no_edit(tmp_path: Path) -> None:
    kept, why = _kept(tmp_path, "test_retain.py", RETAIN.format(name="test_retain", check=ASSERT))
    assert kept == []
    assert any("asserts on the gradients" in w for w in why), why


@pytest.mark.parametrize(
    ("filename", "name", "check"),
    [("train.py", "test_retain", ASSERT), ("test_retain.py", "test_retain", PRINT), ("test_retain.py", "run", ASSERT)],
    ids=["not a test file", "no assertion on gradients", "not a test function"],
)
def test_the_same_code_elsewhere_is_fixed(tmp_path: Path, filename: str, name: str, check: str) -> None:
    kept, _ = _kept(tmp_path, filename, RETAIN.format(name=name, check=check))
    assert kept == ["WF501"]


def test_code_under_warps_overwrite_detector_gets_no_overwrite_edit(tmp_path: Path) -> None:
    kept, why = _kept(tmp_path, "prog.py", DETECTOR.format(switch="    wp.config.verify_autograd_array_access = True"))
    assert kept == []
    assert any("verify_autograd_array_access" in w for w in why), why
    kept, _ = _kept(tmp_path, "prog.py", DETECTOR.format(switch="    pass"))
    assert kept == ["WF104"]


def test_the_refusal_is_in_the_findings_data(tmp_path: Path) -> None:
    path = tmp_path / "test_retain.py"
    path.write_text(RETAIN.format(name="test_retain", check=ASSERT))
    (finding,) = [f for f in check_paths([str(path)], use_cache=False).findings if f.rule == "WF501"]
    assert finding.data["taped"] is True and "test_retain" in finding.data["no_edit"]


@pytest.mark.parametrize(
    ("filename", "text", "rule"),
    [
        ("test_retain.py", RETAIN.format(name="test_retain", check=ASSERT), "WF501"),
        ("prog.py", DETECTOR.format(switch="    wp.config.verify_autograd_array_access = True"), "WF104"),
    ],
    ids=["a test asserts the gradients", "Warp's overwrite check is on"],
)
def test_a_hazard_the_program_observes_on_purpose_is_a_warning(tmp_path: Path, filename: str, text: str,
                                                              rule: str) -> None:
    """Warp's own tests make these hazards to test Warp (test_overwrite.py, test_array.py::test_retain_grad):
    the finding stays, as a warning that says why; the same code in a plain script is an error."""
    path = tmp_path / filename
    path.write_text(text)
    (finding,) = [f for f in check_paths([str(path)], use_cache=False).findings if f.rule == rule]
    assert finding.severity is Severity.WARNING
    assert "a warning here, because" in finding.message
    plain = tmp_path / "train.py"
    plain.write_text(text.replace("verify_autograd_array_access = True", "verify_cuda = False"))
    (finding,) = [f for f in check_paths([str(plain)], use_cache=False).findings if f.rule == rule]
    assert finding.severity is Severity.ERROR and "a warning here" not in finding.message


@pytest.mark.slow
def test_apply_leaves_warps_own_hazard_tests_alone(tmp_path: Path) -> None:
    """The files of the wheel whose edits broke Warp's tests (test_overwrite: 2 failed; test_tape
    test_tape_copy_adjoint_consumption and test_array test_retain_grad failed) stay unchanged."""
    import warp

    root = Path(warp.__file__).parent / "tests"
    names = ["test_overwrite.py", "test_tape.py", "test_array.py"]
    for name in names:
        shutil.copy2(root / name, tmp_path / name)
    planned = plan_fixes([str(tmp_path)], unsafe=False)
    assert planned.changed == {}
    refused = [e for e in planned.edits if not e.kept and "by hand" in e.reason]
    assert {Path(e.finding.path).name for e in refused} == set(names)
