"""Shared test setup: one Warp kernel cache for every test process (compiles once per machine)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("WARP_CACHE_PATH", str(Path.home() / ".cache" / "warpfix-tests-warp"))
