"""Which project functions the host interpreter inlines: calls are linked to the definitions the
interpreter would run, not to every function of the same name (issue 12: at newton's scale nearly
every function was "effectful" and interpreted)."""

from __future__ import annotations

import ast

from warpfix.engine import parse_file
from warpfix.model.host import HostInterpreter
from warpfix.model.library import shared_index

_SIM = '''
import warp as wp


class Solver:
    def step(self, n):
        return wp.zeros(n)


class Recorder:
    def __init__(self):
        self.items = []

    def step(self, n):
        return n + 1

    def add(self, x):
        self.items.append(x)

    def run(self, n):
        return self.step(n)


class Base:
    def step(self, n):
        return n

    def run(self, n):
        return self.step(n)


class Child(Base):
    def step(self, n):
        return wp.zeros(n)


class Axis:
    @classmethod
    def from_any(cls, value):
        return cls(value)


def sum(n):
    return wp.zeros(n)


def total(x):
    return np.sum(x)


def runner(fn):
    return fn()
'''

_MAIN = '''
import helpers
from helpers import make


def direct():
    return make(4)


def through_module():
    return helpers.make(4)


def plain():
    return helpers.describe(4)
'''

_HELPERS = '''
import warp as wp


def make(n):
    return wp.zeros(n)


def describe(n):
    return str(n)
'''


def _effectful(sources: dict[str, str]) -> set[str]:
    files = {}
    for path, text in sources.items():
        src, err = parse_file(path, text)
        assert src is not None, err
        files[path] = src
    modules = {src.module_name: src for src in files.values()}
    interp = HostInterpreter(files, [], modules, shared_index())
    names = set()
    for src in files.values():
        for node in src.nodes_of(ast.ClassDef):
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and (src.path, fn.lineno, fn.col_offset) in interp.effectful:
                    names.add(f"{node.name}.{fn.name}")
        for fn in src.tree.body:
            if isinstance(fn, ast.FunctionDef) and (src.path, fn.lineno, fn.col_offset) in interp.effectful:
                names.add(fn.name)
    return names


def test_self_calls_resolve_by_the_class_and_its_subclasses() -> None:
    found = _effectful({"sim.py": _SIM})
    assert "Solver.step" in found
    # ``self.step()`` of Recorder runs Recorder.step, not Solver.step that shares its name
    assert "Recorder.run" not in found
    # ``self.step()`` of Base may run Child.step (a Child instance is a Base)
    assert "Base.run" in found


def test_appending_and_constructing_by_cls_are_no_effects() -> None:
    found = _effectful({"sim.py": _SIM})
    assert "Recorder.add" not in found
    assert "Axis.from_any" not in found  # ``cls(value)`` builds the class: no callback
    assert "runner" in found  # calling what it was handed still is


def test_an_unknown_modules_function_is_not_a_project_function_of_that_name() -> None:
    found = _effectful({"sim.py": _SIM})
    assert "sum" in found
    assert "total" not in found  # ``np.sum``: numpy's, not the module's ``sum``


def test_calls_follow_imports() -> None:
    found = _effectful({"main.py": _MAIN, "helpers.py": _HELPERS})
    assert {"direct", "through_module"} <= found
    assert "plain" not in found
