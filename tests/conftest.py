"""Shared test setup: one Warp kernel cache for every test process (compiles once per machine)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("WARP_CACHE_PATH", str(Path.home() / ".cache" / "warpfix-tests-warp"))
# `python` in a verify command is the PATH's, as for a user: the interpreter running the tests
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
