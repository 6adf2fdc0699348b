"""Module execution order across project imports (``warpfix/model/import_order.py``)."""

from __future__ import annotations

from warpfix.model import SourceFile
from warpfix.model.import_order import ImportOrder


def _order(texts: dict[str, str]) -> ImportOrder:
    return ImportOrder({name: SourceFile.parse(name, text, name[:-3].replace("/", ".")) for name, text in texts.items()})


def test_transitive_imports_above_a_line() -> None:
    order = _order({
        "main.py": "import helpers\nx = 1\nimport late\n",
        "helpers.py": "from pkg import settings\n",
        "pkg/settings.py": "y = 2\n",
        "late.py": "def f():\n    import inner\n",
        "inner.py": "",
    })
    assert order.executed_before("main.py", 2) == {"helpers.py", "pkg/settings.py"}
    # an import inside a function is not module-level
    assert order.executed_before("main.py", 10) == {"helpers.py", "pkg/settings.py", "late.py"}


_SETTINGS = "import warp as wp\nwp.config.enable_backward = False\n"
_KERNELS = "import warp as wp\n\n\n@wp.kernel\ndef k():\n    pass\n"


def test_runs_before_through_an_importer() -> None:
    order = _order({"main.py": "import settings\nimport kernels\n", "settings.py": _SETTINGS, "kernels.py": _KERNELS})
    assert order.runs_before("settings.py", 2, "kernels.py", 4)
    assert not order.runs_before("kernels.py", 4, "settings.py", 2)
    swapped = _order({"main.py": "import kernels\nimport settings\n", "settings.py": _SETTINGS, "kernels.py": _KERNELS})
    assert not swapped.runs_before("settings.py", 2, "kernels.py", 4)
    direct = _order({"settings.py": _SETTINGS, "kernels.py": "import settings\n" + _KERNELS})
    assert direct.runs_before("settings.py", 2, "kernels.py", 5)


def _reference_before(order: ImportOrder, path: str, line: int) -> set[str]:
    """``executed_before`` the plain way: a new closure from the imports above the line."""
    done: set[str] = set()
    todo = [p for ln, loaded in order.imports.get(path, ()) if ln < line for p in loaded]
    while todo:
        other = todo.pop()
        if other not in done and other != path:
            done.add(other)
            todo.extend(p for _, loaded in order.imports.get(other, ()) for p in loaded)
    return done


def _reference_after(order: ImportOrder, first: str, first_line: int) -> set[str]:
    out: set[str] = set()
    for importer, rows in order.imports.items():
        for line, loaded in rows:
            if (importer == first and first_line < line) or first in _reference_before(order, importer, line):
                out.update(loaded)
    return out


def test_memoised_closures_match_the_plain_definition_on_cyclic_imports() -> None:
    """The closures are memoised per import and extended import by import; on a package whose
    modules import each other in cycles, every line's answer is the plain closure's."""
    texts = {
        "a.py": "import b\nx = 1\nimport c\ny = 2\nimport d\n",
        "b.py": "import a\nz = 3\nimport e\n",
        "c.py": "w = 0\nimport b\nimport a\n",
        "d.py": "import e\n",
        "e.py": "v = 1\nimport c\n",
    }
    order = _order(texts)
    lines = [(path, line) for path, text in texts.items() for line in range(1, text.count("\n") + 2)]
    for path, line in lines:
        assert order.executed_before(path, line) == _reference_before(order, path, line), (path, line)
    for first, first_line in lines:
        after = _reference_after(order, first, first_line)
        for second, second_line in lines:
            want = first_line < second_line if first == second else (
                first in _reference_before(order, second, second_line) or second in after)
            assert order.runs_before(first, first_line, second, second_line) == want, (first, first_line, second, second_line)
