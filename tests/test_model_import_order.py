"""Module execution order across project imports (``warpfix/model/import_order.py``)."""

from __future__ import annotations

from warpfix.model import SourceFile
from warpfix.model.import_order import executed_before, runs_before


def _files(texts: dict[str, str]) -> dict[str, SourceFile]:
    return {name: SourceFile.parse(name, text, name[:-3].replace("/", ".")) for name, text in texts.items()}


def test_transitive_imports_above_a_line() -> None:
    files = _files({
        "main.py": "import helpers\nx = 1\nimport late\n",
        "helpers.py": "from pkg import settings\n",
        "pkg/settings.py": "y = 2\n",
        "late.py": "def f():\n    import inner\n",
        "inner.py": "",
    })
    assert executed_before(files, files["main.py"], 2) == {"helpers.py", "pkg/settings.py"}
    # an import inside a function is not module-level
    assert executed_before(files, files["main.py"], 10) == {"helpers.py", "pkg/settings.py", "late.py"}


def test_runs_before_through_an_importer() -> None:
    files = _files({
        "main.py": "import settings\nimport kernels\n",
        "settings.py": "import warp as wp\nwp.config.enable_backward = False\n",
        "kernels.py": "import warp as wp\n\n\n@wp.kernel\ndef k():\n    pass\n",
    })
    s, k = files["settings.py"], files["kernels.py"]
    assert runs_before(files, s, 2, k, 4)
    assert not runs_before(files, k, 4, s, 2)
    swapped = _files({"main.py": "import kernels\nimport settings\n", "settings.py": s.text, "kernels.py": k.text})
    assert not runs_before(swapped, swapped["settings.py"], 2, swapped["kernels.py"], 4)
    direct = _files({"settings.py": s.text, "kernels.py": "import settings\n" + k.text})
    assert runs_before(direct, direct["settings.py"], 2, direct["kernels.py"], 5)
