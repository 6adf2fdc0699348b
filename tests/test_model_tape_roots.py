"""Roots that cannot create a tape are not interpreted by a check (issue 12): their traces hold no
event recorded on a tape and no tape operation, which is all the rules read. The filter must keep
every root whose run reaches ``wp.Tape()``, however the call reaches it."""

from __future__ import annotations

import textwrap

from warpfix.engine import check_sources
from warpfix.model import SourceFile, build_project, module_name_for
from warpfix.model.tapeflow import RESET_KINDS

_KERNEL = """
import warp as wp


@wp.kernel
def square(a: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i] * a[i]
"""

_FIT = _KERNEL + """

def fit(a, out):
    tape = wp.Tape()
    with tape:
        wp.launch(square, 1, inputs=[a], outputs=[out])
    tape.backward(out)
"""


def _project(**files: str):
    srcs = {f"{name}.py": SourceFile.parse(f"{name}.py", textwrap.dedent(code), module_name_for(f"{name}.py"))
            for name, code in files.items()}
    return build_project(srcs)


def _taped(traces) -> set[str]:
    tape_ops = {"tape_begin", "tape_end", "backward", *RESET_KINDS}
    return {t.root for t in traces if any(e.recorded or e.kind in tape_ops for e in t.events)}


def test_a_root_that_reaches_no_tape_is_not_interpreted() -> None:
    pr = _project(m=_KERNEL + """

def forward(a, out):
    wp.launch(square, 1, inputs=[a], outputs=[out])
""")
    assert [t.root for t in pr.traces] == ["m.py:forward"]  # kept traces: every root (tests, quick fixes)
    assert list(pr.iter_traces()) == []


_MAIN = """
def main():
    a = wp.zeros(1, requires_grad=True)
    out = wp.zeros(1, requires_grad=True)
    out.zero_()
"""


def _assert_kept(**files: str) -> None:
    pr = _project(**files)
    every = _taped(pr.traces)
    assert "m.py:main" in every
    assert _taped(pr.iter_traces()) == every


def test_a_function_handed_on_and_called_later_keeps_its_caller() -> None:
    _assert_kept(m=_FIT + """

def run(fn, a, out):
    fn(a, out)
""" + _MAIN + """    run(fit, a, out)
""")


def test_a_function_imported_under_another_name_keeps_the_root() -> None:
    _assert_kept(fitting=_FIT, m="""
import warp as wp
from fitting import fit as train
""" + _MAIN + """    train(a, out)
""")


def test_a_check_skips_the_untaped_root_and_reports_the_taped_one() -> None:
    """Beside a root that only launches (skipped), the root that records is checked: WF201 on the
    intermediate of ``fit``."""
    text = textwrap.dedent(_KERNEL + """

def forward(a, out):
    wp.launch(square, 1, inputs=[a], outputs=[out])


def fit():
    a = wp.zeros(1, requires_grad=True)
    mid = wp.zeros(1)
    out = wp.zeros(1, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, 1, inputs=[a], outputs=[mid])
        wp.launch(square, 1, inputs=[mid], outputs=[out])
    tape.backward(out)
""")
    found = check_sources({"m.py": text}).findings
    assert [f.rule for f in found] == ["WF201"]
