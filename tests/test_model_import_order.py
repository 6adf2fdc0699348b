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
