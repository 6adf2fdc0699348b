"""Lazy imports (issue 12 item 3): ``--version``, ``rules`` and ``check`` load neither libcst, nor the
verifier, nor pygls, nor rich unless their output needs it. Asserted on ``sys.modules`` after running
the CLI in a fresh interpreter, not on a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import BUGGY, env

HEAVY = ("libcst", "codemods", "warpfix.verify", "warpfix.fixes", "warpfix.apply", "warpfix.acceptance",
         "warpfix.lsp", "pygls", "lsprotocol", "rich", "warp")

PROBE = """
import contextlib, io, json, sys
from warpfix.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
heavy = sorted({m.split(".")[0] if not m.startswith("warpfix.") else ".".join(m.split(".")[:2])
                for m in sys.modules})
print(json.dumps({"code": code, "modules": heavy}))
"""


def loaded(args: list[str], cwd: Path) -> tuple[int, set[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True,
                          env=env(), timeout=120)
    data = json.loads(proc.stdout.splitlines()[-1])
    return data["code"], set(data["modules"])


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["--version"], ()),
        (["rules"], ()),
        (["rules", "WF401"], ()),
        (["check", "--no-cache", "--format", "json", "train.py"], ()),
        (["check", "--no-cache", "--format", "github", "train.py"], ()),
        # SARIF carries each fix's edits, computed with the codemods
        (["check", "--no-cache", "--format", "sarif", "train.py"], ("libcst", "codemods", "warpfix.fixes")),
        (["check", "--no-cache", "--format", "json", "--statistics", "train.py"], ()),
        (["check", "--format", "json", "train.py"], ()),  # the result cache: a miss, then stored
        (["check", "--no-cache", "train.py"], ("rich",)),  # the text report is printed with rich
    ],
)
def test_heavy_modules_only_when_used(tmp_path: Path, args: list[str], allowed: tuple[str, ...]) -> None:
    (tmp_path / "train.py").write_text(BUGGY)
    code, modules = loaded(args, tmp_path)
    assert code in (0, 1)
    assert "warpfix.cli" in modules
    assert not {m for m in HEAVY if m in modules} - set(allowed)


def test_python_m_warpfix_in_a_folder_that_shadows_the_standard_library(tmp_path: Path) -> None:
    """``python -m warpfix`` run inside a folder holding ``math.py`` and ``types.py`` (newton's own
    package folder has both): ``-m`` puts the folder first on ``sys.path``; before, the standard
    library's ``import math`` got the folder's module and the check died with a traceback."""
    (tmp_path / "math.py").write_text("raise ImportError('the folder shadowed the standard library')\n")
    (tmp_path / "types.py").write_text("raise ImportError('the folder shadowed the standard library')\n")
    (tmp_path / "fit.py").write_text(BUGGY)
    proc = subprocess.run([sys.executable, "-m", "warpfix", "check", "--no-cache", "--output-format", "json",
                           "fit.py"], cwd=tmp_path, capture_output=True, text=True, env=env(), timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert [f["rule"] for f in json.loads(proc.stdout)["findings"]] == ["WF401"]


def test_rules_does_not_load_the_host_interpreter(tmp_path: Path) -> None:
    """``rules`` interprets nothing: the model's host interpreter stays unloaded."""
    probe = ("import contextlib, io, sys\nfrom warpfix.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    main(['rules'])\n"
             "print('warpfix.model.host.interpreter' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, env=env(),
                          timeout=120)
    assert proc.stdout.split() == ["False"], proc.stderr
