"""``apply`` on real third-party code: files of the warp-lang wheel (copied first).

The whole wheel (491 files) was run once by hand (per file, 12 files edited, all compiling);
this keeps a sample that exercises most codemods (WF101, WF106, WF202, WF401, WF501, WF701) on
code nobody wrote for warpfix: every file stays byte-identical or still compiles, and a second
apply changes nothing.
"""

from __future__ import annotations

import py_compile
import shutil
from pathlib import Path

import pytest
import warp

from warpfix.cli import main

SAMPLE = [
    "tests/test_overwrite.py",
    "tests/test_options.py",
    "tests/test_tape.py",
    "tests/test_cpu_precompiled_headers.py",
    "examples/fem/example_apic_fluid.py",
    "tests/test_quat.py",
    "_src/optim/linear.py",
]


@pytest.mark.slow
def test_apply_on_warp_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(warp.__file__).parent
    for rel in SAMPLE:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, tmp_path / rel)
    monkeypatch.chdir(tmp_path)
    assert main(["apply", "--no-cache", "--unsafe-fixes", "."]) in (0, 1)
    changed = [rel for rel in SAMPLE if (tmp_path / rel).read_bytes() != (root / rel).read_bytes()]
    assert changed, "the sample exercises no codemod any more"
    for rel in changed:
        py_compile.compile(str(tmp_path / rel), doraise=True)
    after = {rel: (tmp_path / rel).read_bytes() for rel in SAMPLE}
    assert main(["apply", "--no-cache", "--unsafe-fixes", "."]) == 0
    assert {rel: (tmp_path / rel).read_bytes() for rel in SAMPLE} == after
