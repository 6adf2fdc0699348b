"""Runtime findings feed the fixer (issue 9, item 3): a runtime finding classified to a static rule,
where `check` found nothing, is offered and proven by `apply --check` with that rule's codemod."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from warpfix.apply import Selection, check_fixes
from warpfix.engine import check_paths
from warpfix.finding import Span
from warpfix.fixes import compute_edits
from warpfix.verify.fixable import runtime_fixes
from warpfix.verify.report import make_finding

PROGRAMS = Path(__file__).parent / "verify_programs"
HIDDEN = "hidden_zero.py"


def backward_line(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if "self.tape.backward(loss)" in line)


def test_a_classified_runtime_finding_becomes_its_rules_fix():
    text = (PROGRAMS / HIDDEN).read_text()
    sources = {str(PROGRAMS / HIDDEN): text}
    wf903 = make_finding("WF903", HIDDEN, backward_line(text), "grad already non-zero", {"array": "self.k"},
                         classified_as="WF301")  # fmt: skip
    [fix] = runtime_fixes([wf903], str(PROGRAMS), sources, [])
    assert (fix.rule, fix.path, fix.line, fix.fix.safety.value) == ("WF301", str(PROGRAMS / HIDDEN), wf903.line, "safe")
    assert "WF903" in fix.message
    edited = compute_edits(sources, [fix]).new_sources[str(PROGRAMS / HIDDEN)]
    # the repeated method's own shape: zero after the optimizer step that consumes the gradient
    assert "wp.launch(sgd, dim=N, inputs=[self.k, self.k.grad, 0.05])\n        self.tape.zero()\n" in edited


def test_a_leftover_gradient_read_is_fixed_at_its_backward():
    """WF903 at the read of a leftover gradient (warpfix.verify.leftovers) points at the consuming line; the
    codemod works at the backward its data names, and check's finding there is the same bug."""
    text = (PROGRAMS / HIDDEN).read_text()
    path = str(PROGRAMS / HIDDEN)
    line = backward_line(text)
    read = make_finding("WF903", HIDDEN, line + 5, "read here holds summed gradients", {"array": "self.k",
                        "backward": f"{HIDDEN}:{line}"}, classified_as="WF301")  # fmt: skip
    [fix] = runtime_fixes([read], str(PROGRAMS), {path: text}, [])
    assert (fix.rule, fix.line) == ("WF301", line)
    static = replace(fix, span=Span(path, line, 5, line, 9))
    assert runtime_fixes([read], str(PROGRAMS), {path: text}, [static]) == []


def test_what_check_found_library_lines_and_unknown_shapes_are_not_offered():
    text = (PROGRAMS / HIDDEN).read_text()
    path = str(PROGRAMS / HIDDEN)
    line = backward_line(text)
    wf903 = make_finding("WF903", HIDDEN, line, "grad", {}, classified_as="WF301")
    [offered] = runtime_fixes([wf903], str(PROGRAMS), {path: text}, [])
    static = replace(offered, span=Span(path, line + 1, 5, line + 1, 9))  # check's own finding of the same bug
    assert runtime_fixes([wf903], str(PROGRAMS), {path: text}, [static]) == []
    no_codemod = make_finding("WF905", HIDDEN, line, "tracker", {}, classified_as="WF999")  # no such rule
    library = make_finding("WF902", "../lib/solver.py", 10, "lib", {}, classified_as="WF101")
    unclassified = make_finding("WF902", HIDDEN, line, "host", {})
    # an overwrite FD could not confirm (a warning) is not worth a trial run of the fixer
    unconfirmed = make_finding("WF902", HIDDEN, line, "fem", {}, classified_as="WF303", severity="warning")
    assert runtime_fixes([no_codemod, library, unclassified, unconfirmed], str(PROGRAMS), {path: text}, []) == []


@pytest.mark.slow
def test_apply_check_fixes_a_missing_zero_only_verify_sees(tmp_path):
    for name in (HIDDEN, "common_kernels.py"):
        shutil.copyfile(PROGRAMS / name, tmp_path / name)
    target = str(tmp_path / HIDDEN)
    assert check_paths([target], use_cache=False).findings == []  # the static model misses it
    result = check_fixes([target], ["python", HIDDEN], root=str(tmp_path), selection=Selection(use_cache=False))
    assert result.errors == []
    [edit] = result.edits
    assert (edit.finding.rule, edit.kept) == ("WF301", True), edit.reason
    assert edit.fd_before["runtime_findings"] == ["WF903"] and edit.fd_after["verdict"] == "pass"
    assert "self.tape.zero()" in result.changed[target]
