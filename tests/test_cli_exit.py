"""The ``warpfix`` program exits without tearing its model down, and loses nothing by it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests._cli import BUG_LINE, BUGGY, env

# ``python -m warpfix`` with an object whose finaliser runs only at interpreter shut-down and an
# exit handler, so the test sees which of the two a check's exit runs
_RUN = textwrap.dedent(
    """\
    import atexit, builtins, runpy, sys

    class TornDown:
        def __del__(self):
            sys.stderr.write("torn down\\n")

    builtins._warpfix_test_sentinel = TornDown()
    atexit.register(lambda: sys.stderr.write("exit handler ran\\n"))
    sys.argv = ["warpfix", *sys.argv[1:]]
    runpy.run_module("warpfix", run_name="__main__")
    """
)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _RUN, *args], cwd=tmp_path, capture_output=True, text=True,
                          env=env(), timeout=120)


def test_check_exits_without_teardown_after_exit_handlers_and_all_output(tmp_path: Path) -> None:
    (tmp_path / "fit.py").write_text(BUGGY)
    proc = _run(tmp_path, "check", "--no-cache", "--output-format", "json", "-o", "out.json", "fit.py")
    assert proc.returncode == 1, proc.stderr  # a finding
    assert "exit handler ran" in proc.stderr
    assert "torn down" not in proc.stderr  # the objects alive at the end are not freed one by one
    doc = json.loads((tmp_path / "out.json").read_text())
    assert [(f["rule"], f["line"]) for f in doc["findings"]] == [("WF401", BUG_LINE)]
    shown = _run(tmp_path, "check", "--no-cache", "--output-format", "json", "fit.py")
    assert shown.returncode == 1 and json.loads(shown.stdout)["findings"] == doc["findings"]

