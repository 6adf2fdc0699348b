"""The runtime early-gradient-read check (warpfix/verify/early_grad.py): a parameter's .grad read inside
the tape block (WF302) or after it and before its backward (WF304), at the line of the read."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpfix.verify import run_verify

PROGRAMS = Path(__file__).parent / "verify_programs"
PROGRAM = "early_grad.py"


def line_of(text: str) -> int:
    return next(i for i, line in enumerate((PROGRAMS / PROGRAM).read_text().splitlines(), 1) if text in line)


def early_reads(mode: str) -> list[tuple[str, int, str]]:
    report = run_verify(["python", PROGRAM, *([f"--{mode}"] if mode else [])], cwd=str(PROGRAMS), timeout=120.0)
    return sorted((f.rule, f.line, f.data["array"]) for f in report.findings if f.data.get("runtime") == "early-grad")


STEP = "wp.launch(sgd, dim=N, inputs=[p, p.grad, 0.01])"


@pytest.mark.parametrize(
    ("mode", "rule", "where"),
    [
        ("in-tape", "WF302", STEP),  # an optimizer step inside `with tape:`
        ("before-backward", "WF304", STEP),  # between the tape block and the backward
        ("host", "WF304", "p.grad.numpy()"),  # a host read before the backward
    ],
)
def test_a_gradient_read_before_its_backward_is_reported_at_the_read(mode: str, rule: str, where: str) -> None:
    lines = [i for i, text in enumerate((PROGRAMS / PROGRAM).read_text().splitlines(), 1) if where in text]
    [found] = early_reads(mode)
    assert found[0] == rule and found[1] in lines and found[2] == "p", found


@pytest.mark.parametrize("mode", ["", "jacobian", "check-first"],
                         ids=["step-after-backward", "two-backwards-of-one-recording", "read-just-before-recording"])
def test_reads_after_the_backward_that_produced_them_are_clean(mode: str) -> None:
    assert early_reads(mode) == []
