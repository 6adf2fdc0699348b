"""Issue 11: ``apply`` on third-party code nobody wrote for warpfix edits no code that no tape records.

Measured on copies of the whole trees with ``bench/apply_libraries.py DIR --scratch D`` (plain
apply, safe fixes): mujoco-warp 4.0.0 (76 files) and newton (973 files) change no file (23 and 18
safe fixes offered, all refused: "no tape records this code"); warp-lang 1.19's sources (491
files) change none either (14 offered: 7 where the program observes the overwrite or asserts on
the gradients, 7 WF403 loops not mechanical). This pins the library half on files of newton's
geometry module, whose kernels no tape in those files records and whose WF402 findings carry a
safe fix: the fixes are offered, refused, and no byte changes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

newton = pytest.importorskip("newton")

from warpfix.cli import main  # noqa: E402

GEOMETRY = ["support_function.py", "collision_primitive.py"]


def test_apply_edits_nothing_in_newton_geometry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    src = Path(newton.__file__).parent / "_src" / "geometry"
    lib = tmp_path / "geometry"
    lib.mkdir()
    for name in GEOMETRY:
        shutil.copy2(src / name, lib / name)
    before = {p.name: p.read_bytes() for p in lib.iterdir()}
    monkeypatch.chdir(tmp_path)
    main(["apply", "--no-cache", "--output-format", "json", "geometry"])
    report = json.loads(capsys.readouterr().out)
    assert {p.name: p.read_bytes() for p in lib.iterdir()} == before
    assert report["edits"], "no safe fix offered any more: the test proves nothing"
    assert {(e["kept"], e["reason"]) for e in report["edits"]} == {(False, "no tape records this code")}
    assert all(f["data"].get("taped") is False and f["severity"] != "error" for f in report["findings"])
