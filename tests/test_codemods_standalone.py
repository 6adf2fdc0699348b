"""Each codemod also runs through ``python -m libcst.tool codemod`` (the data keys become options)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "libcst.tool", "codemod", "-x", "--no-format", "--hide-progress", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO), "PATH": ""},
    )


def test_local_rewrite_at_the_given_line(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("d = wp.sqrt(wp.dot(v, v))\ne = wp.sqrt(wp.dot(u, u))\n", encoding="utf-8")
    proc = _run(tmp_path, "codemods.wf702_length.UseLength", "--file", "m.py", "--line", "2", "m.py")
    assert proc.returncode == 0, proc.stderr
    assert path.read_text(encoding="utf-8") == "d = wp.sqrt(wp.dot(v, v))\ne = wp.length(u)\n"


def test_cross_file_rewrite_with_data_options(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(
        "@wp.kernel\ndef k(a: wp.array(dtype=float)):\n    i = wp.tid()\n    a[i] *= 2.0\n", encoding="utf-8"
    )
    (tmp_path / "main.py").write_text(
        "from k import k\n\nwp.launch(k, dim=4, inputs=[x])\n", encoding="utf-8"
    )
    proc = _run(tmp_path, "codemods.wf401_kernel_output.KernelOutput", "--file", "k.py", "--line", "4",
                "--kernel", "k", "--param", "a", "k.py", "main.py")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "k.py").read_text(encoding="utf-8") == (
        "@wp.kernel\ndef k(a: wp.array(dtype=float), a_out: wp.array(dtype=float)):\n"
        "    i = wp.tid()\n    a_out[i] = a[i] * 2.0\n"
    )
    assert (tmp_path / "main.py").read_text(encoding="utf-8") == (
        "from k import k\n\na_out = wp.empty_like(x)\nwp.launch(k, dim=4, inputs=[x], outputs=[a_out])\nx = a_out\n"
    )
