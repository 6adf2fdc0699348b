"""Shared by the independent kink checks (``bench/darcy_kink.py``, ``bench/fluid_kink.py``): load a Warp
example from its file, and compare its autodiff gradient with central and one-sided FD along its own direction."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np

#: ``loss(v, backward)``: the program's loss at ``v`` and, when ``backward``, its autodiff gradient (flat or v-shaped)
Loss = Callable[[np.ndarray, bool], tuple[float, np.ndarray | None]]


def load_example(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def print_slopes(loss: Loss, v0: np.ndarray, steps: Sequence[float], label: str) -> None:
    """At ``v0``: autodiff along its own gradient against central, right and left differences at each step."""
    base, grad = loss(v0, True)
    ad = float(np.linalg.norm(grad))
    direction = (grad / ad).reshape(v0.shape)
    for h in steps:
        plus, _ = loss((v0 + h * direction).astype(np.float32), False)
        minus, _ = loss((v0 - h * direction).astype(np.float32), False)
        fd = (plus - minus) / (2 * h)
        print(f"{label} h={h:g}: AD {ad:.5g}  FD central {fd:.5g} right {(plus - base) / h:.5g} "
              f"left {(base - minus) / h:.5g}  AD/FD {ad / fd:.3f}", flush=True)  # fmt: skip
