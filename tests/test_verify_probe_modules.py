"""The injected probe package holds every module the probe imports (runner.PROBE_MODULES)."""

import ast
from pathlib import Path

from warpfix.verify.runner import PROBE_MODULES

_VERIFY = Path(__file__).resolve().parent.parent / "warpfix" / "verify"


def test_probe_modules_hold_every_relative_import() -> None:
    """Each relative import of a probe module names a module in PROBE_MODULES (else the copied package breaks)."""
    missing = []
    for name in PROBE_MODULES:
        for node in ast.walk(ast.parse((_VERIFY / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets = [node.module] if node.module else [a.name for a in node.names]
                missing += [f"{name}: {t}" for t in targets if f"{t}.py" not in PROBE_MODULES]
    assert not missing
