"""Roots that cannot create a tape are not interpreted by a check (issue 12): their traces hold no
event recorded on a tape and no tape operation, which is all the rules read in a program that
records. The filter must keep every root whose run reaches ``wp.Tape()``, however the call reaches
it, and skip a root whose calls can only reach a taped method of a class it never instantiates."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from warpfix.engine import check_paths, check_sources
from warpfix.model import SourceFile, build_project, module_name_for
from warpfix.model.host.tape_roots import TapeRoots
from warpfix.model.library import shared_index
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

_MAIN = """
def main():
    a = wp.zeros(1, requires_grad=True)
    out = wp.zeros(1, requires_grad=True)
    out.zero_()
"""


def _project(library=None, **files: str):
    srcs = {f"{name}.py": SourceFile.parse(f"{name}.py", textwrap.dedent(code), module_name_for(f"{name}.py"))
            for name, code in files.items()}
    return build_project(srcs, library=library)


def _taped(traces) -> set[str]:
    tape_ops = {"tape_begin", "tape_end", "backward", *RESET_KINDS}
    return {t.root for t in traces if any(e.recorded or e.kind in tape_ops for e in t.events)}


def _roots(traces) -> set[str]:
    return {t.root for t in traces}


def _assert_kept(root: str = "m.py:main", library=None, **files: str) -> None:
    """``root`` records on a tape, and the filtered run interprets it (and every other taped root)."""
    pr = _project(library=library, **files)
    every = _taped(pr.traces)
    assert root in every
    assert _taped(pr.iter_traces()) == every


def test_an_untaped_root_beside_a_taped_one_is_not_interpreted() -> None:
    pr = _project(m=_FIT + """

def forward(a, out):
    wp.launch(square, 1, inputs=[a], outputs=[out])
""")
    assert _roots(pr.traces) == {"m.py:fit", "m.py:forward"}  # kept traces: every root (tests, quick fixes)
    assert _roots(pr.iter_traces()) == {"m.py:fit"}
    assert pr.roots_skipped == 2  # the module body and forward()


def test_without_any_tape_no_root_is_interpreted() -> None:
    pr = _project(m=_KERNEL + """

def forward(a, out):
    wp.launch(square, 1, inputs=[a], outputs=[out])
""")
    assert _roots(pr.traces) == {"m.py:forward"}
    assert list(pr.iter_traces()) == []
    assert pr.roots_skipped == 2  # the module body and forward()


def test_a_method_of_a_class_the_root_never_instantiates_does_not_keep_it() -> None:
    """``sim.step()`` may run ``Trainer.step`` (which records) only where a ``Trainer`` can exist."""
    code = _KERNEL + """

class Trainer:
    def step(self, a, out):
        tape = wp.Tape()
        with tape:
            wp.launch(square, 1, inputs=[a], outputs=[out])
        tape.backward(out)


class Sim:
    def step(self, a, out):
        wp.launch(square, 1, inputs=[a], outputs=[out])


def simulate(a, out):
    sim = Sim()
    sim.step(a, out)


def train(a, out):
    trainer = Trainer()
    trainer.step(a, out)
"""
    pr = _project(m=code)
    assert "m.py:simulate" in _roots(pr.traces)
    assert _taped(pr.traces) == {"m.py:train", "m.py:Trainer.step"}
    assert _roots(pr.iter_traces()) == {"m.py:train", "m.py:Trainer.step"}


def test_a_method_called_before_its_class_is_found_keeps_the_root() -> None:
    """The call ``obj.fit()`` is seen before the class of ``obj``, which a helper two calls down
    instantiates: the method is followed once the class is."""
    _assert_kept(m=_KERNEL + """

class Trainer:
    def __init__(self):
        self.a = wp.zeros(1, requires_grad=True)
        self.out = wp.zeros(1, requires_grad=True)

    def fit(self):
        tape = wp.Tape()
        with tape:
            wp.launch(square, 1, inputs=[self.a], outputs=[self.out])
        tape.backward(self.out)


class Other:
    def fit(self):
        pass


def build():
    wp.zeros(1)
    return Trainer()


def make():
    wp.zeros(1)
    return build()


def main():
    obj = make()
    obj.fit()
""")


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


def test_a_bound_method_handed_on_keeps_the_root() -> None:
    _assert_kept(m=_KERNEL + """

class Trainer:
    def fit(self, a, out):
        tape = wp.Tape()
        with tape:
            wp.launch(square, 1, inputs=[a], outputs=[out])
        tape.backward(out)


def run(fn, a, out):
    fn(a, out)
""" + _MAIN + """    run(Trainer().fit, a, out)
""")


def test_a_property_that_records_keeps_the_root() -> None:
    _assert_kept(m=_KERNEL + """

class Trainer:
    def __init__(self, a, out):
        self.a, self.out = a, out

    @property
    def loss(self):
        tape = wp.Tape()
        with tape:
            wp.launch(square, 1, inputs=[self.a], outputs=[self.out])
        tape.backward(self.out)
        return self.out
""" + _MAIN + """    t = Trainer(a, out)
    t.loss
""")


def test_the_one_method_of_a_name_called_on_an_unknown_value_keeps_the_root() -> None:
    """The interpreter guesses the class of an unknown receiver when one project class has the
    method: a root whose parameter is such a receiver may record."""
    _assert_kept(root="m.py:drive", m=_KERNEL + """

class Trainer:
    def __init__(self):
        self.a = wp.zeros(1, requires_grad=True)
        self.out = wp.zeros(1, requires_grad=True)

    def fit_once(self):
        tape = wp.Tape()
        with tape:
            wp.launch(square, 1, inputs=[self.a], outputs=[self.out])
        tape.backward(self.out)


def drive(trainer):
    trainer.fit_once()
""")


def test_a_class_an_accessor_returns_keeps_the_root() -> None:
    """``trainer_class()`` is not inlined (it calls nothing), but the interpreter evaluates what such
    a small accessor returns: the class, constructed and run by the caller."""
    _assert_kept(m=_KERNEL + """

class Trainer:
    def fit(self, a, out):
        tape = wp.Tape()
        with tape:
            wp.launch(square, 1, inputs=[a], outputs=[out])
        tape.backward(out)


class Other:
    def fit(self, a, out):
        wp.launch(square, 1, inputs=[a], outputs=[out])


def trainer_class():
    return Trainer
""" + _MAIN + """    cls = trainer_class()
    cls().fit(a, out)
""")


def test_super_reaches_the_base_method_the_subclass_overrides() -> None:
    _assert_kept(m=_KERNEL + """

class Base:
    def fit(self, a, out):
        tape = wp.Tape()
        with tape:
            wp.launch(square, 1, inputs=[a], outputs=[out])
        tape.backward(out)


class Child(Base):
    def fit(self, a, out):
        out.zero_()
        super().fit(a, out)
""" + _MAIN + """    Child().fit(a, out)
""")


def test_a_tape_opened_in_a_context_manager_keeps_the_root() -> None:
    _assert_kept(m=_KERNEL + """
from contextlib import contextmanager


@contextmanager
def recording():
    tape = wp.Tape()
    with tape:
        yield tape


""" + _MAIN + """    with recording() as tape:
        wp.launch(square, 1, inputs=[a], outputs=[out])
    tape.backward(out)
""")


def test_a_class_defined_in_the_function_keeps_it() -> None:
    _assert_kept(m=_KERNEL + """

def main():
    a = wp.zeros(1, requires_grad=True)
    out = wp.zeros(1, requires_grad=True)

    class Local:
        def fit(self):
            tape = wp.Tape()
            with tape:
                wp.launch(square, 1, inputs=[a], outputs=[out])
            tape.backward(out)

    obj = Local()
    obj.fit()
""")


def test_a_library_that_calls_back_what_it_is_handed_keeps_the_root() -> None:
    """``newton.examples.run(example, args)`` calls ``example.step()``: the module body never names
    ``step``, yet it records through the library."""
    pytest.importorskip("newton")
    _assert_kept(root="m.py:<module>", library=shared_index(), m=_KERNEL + """
import newton
import newton.examples


class Example:
    def __init__(self, viewer, args):
        self.a = wp.zeros(1, requires_grad=True)
        self.out = wp.zeros(1, requires_grad=True)

    def step(self):
        tape = wp.Tape()
        with tape:
            wp.launch(square, 1, inputs=[self.a], outputs=[self.out])
        tape.backward(self.out)

    def render(self):
        pass


if __name__ == "__main__":
    viewer, args = newton.examples.init()
    example = Example(viewer, args)
    newton.examples.run(example, args)
""")


def test_what_a_root_sees_does_not_depend_on_the_roots_before_it() -> None:
    """A function whose inlining runs past its budget is opaque for the rest of that root only: an
    earlier root that found it too costly does not make it opaque in a later one (which a filtered
    check may run without the earlier root)."""
    from warpfix.model.host import limits

    code = _FIT + """

def setup():
    x = wp.zeros(1)
""" + "".join(f"    y{k} = {k}\n" for k in range(limits.CALL_STEPS + 10)) + """    return x


def first():
    setup()


def main():
    a = wp.zeros(1, requires_grad=True)
    out = wp.zeros(1, requires_grad=True)
    setup()
    fit(a, out)
"""
    pr = _project(m=code)
    alloc_line = textwrap.dedent(code).splitlines().index("    x = wp.zeros(1)") + 1
    by_root = {t.root: t for t in pr.traces}
    assert [r for r in by_root if r in ("m.py:first", "m.py:main")] == ["m.py:first", "m.py:main"]
    for root in ("m.py:first", "m.py:main"):
        assert any(e.kind == "alloc" and e.span.line == alloc_line for e in by_root[root].events), root


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


def test_a_program_that_records_nothing_is_checked_alike() -> None:
    """No tape at all, or a tape that records nothing: the kernel-body rules report every kernel
    (at warning severity), which needs no trace, so skipping the roots changes nothing."""
    text = textwrap.dedent(_KERNEL + """

@wp.kernel
def scale(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] *= 2.0


def forward(a):
    wp.launch(scale, 1, inputs=[a])
    a.zero_()
""")
    for extra in ("", "\n\ndef unused():\n    tape = wp.Tape()\n    return tape\n"):
        filtered = check_sources({"m.py": text + extra}).findings
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(TapeRoots, "may_tape", lambda self, units, classes=(): True)
            every = check_sources({"m.py": text + extra}).findings
        assert [f.to_json() for f in filtered] == [f.to_json() for f in every]
        assert [(f.rule, f.severity.value) for f in filtered] == [("WF401", "warning")]


GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def _golden_variants() -> list[Path]:
    out = []
    for case_dir in sorted(GOLDEN.iterdir()):
        case_file = case_dir / "case.json"
        if case_file.is_file():
            out += [case_dir / v for v in json.loads(case_file.read_text())["variants"]]
    return out


def test_the_filter_changes_no_golden_finding(monkeypatch) -> None:
    """Every golden variant gives the same findings (messages, notes and data included) with the
    filter and with every root interpreted; and the filter does skip roots in some of them."""
    import os

    import warpfix.model as model_mod

    skipped = 0
    real_iter = model_mod.Project.iter_traces

    def counting(self, every_root=False):
        nonlocal skipped
        yield from real_iter(self, every_root)
        skipped += self.roots_skipped

    cwd = os.getcwd()
    try:
        for variant in _golden_variants():
            os.chdir(variant)
            with monkeypatch.context() as mp:
                mp.setattr(model_mod.Project, "iter_traces", counting)
                filtered = [f.to_json() for f in check_paths(["."], use_cache=False).findings]
            with monkeypatch.context() as mp:
                mp.setattr(TapeRoots, "may_tape", lambda self, units, classes=(): True)
                every = [f.to_json() for f in check_paths(["."], use_cache=False).findings]
            assert filtered == every, variant
    finally:
        os.chdir(cwd)
    assert skipped > 0


def test_the_filter_changes_no_finding_of_a_rule_example(monkeypatch) -> None:
    """Every rule's valid and invalid examples (every rule at once) give the same findings with the
    filter and with every root interpreted."""
    from warpfix.engine import parse_version
    from warpfix.rules import all_rules

    for rule in all_rules():
        for ex in [*rule.VALID, *rule.INVALID]:
            sources = {"main.py": ex.code} if isinstance(ex.code, str) else dict(ex.code)
            version = parse_version(ex.warp_version) if ex.warp_version else None
            filtered = [f.to_json() for f in check_sources(sources, warp_version=version).findings]
            with monkeypatch.context() as mp:
                mp.setattr(TapeRoots, "may_tape", lambda self, units, classes=(): True)
                every = [f.to_json() for f in check_sources(sources, warp_version=version).findings]
            assert filtered == every, (rule.id, ex.code)
