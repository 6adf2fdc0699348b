"""Running the real command line (``python -m warpfix``) from the CLI tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# WF401 at line 7 (`x[i] *= s`), fixable.
BUGGY = textwrap.dedent(
    """\
    import warp as wp


    @wp.kernel
    def scale(x: wp.array(dtype=float), s: float):
        i = wp.tid()
        x[i] *= s


    @wp.kernel
    def loss_k(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, x[i] * x[i])


    x = wp.ones(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, 4, inputs=[x, 2.0])
        wp.launch(loss_k, 4, inputs=[x, loss])
    tape.backward(loss)
    """
)
BUG_LINE = 7


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    # no empty entry: Python reads one as the working folder (a test running in a folder that holds
    # ``math.py`` would import it)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), out.get("PYTHONPATH", "")) if p)
    out.update(extra)
    return out


def warpfix(*args: str, cwd: Path | str, stdin: str | None = None, timeout: float = 120,
            **env_extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warpfix", *args], cwd=cwd, input=stdin, capture_output=True, text=True,
        env=env(**env_extra), timeout=timeout,
    )
