"""Cost of `warpfix verify` against one plain run of the same program (goal: ratio <= 2).

    python bench/verify_cost.py                 # the verify test programs and the golden cases
    python bench/verify_cost.py --only springs  # programs whose label contains a word

Both sides are measured as typed: ``python prog.py`` against ``warpfix verify -- python prog.py``,
each a whole process (interpreter start, imports, ``import warp`` and the verifier's own runs). The
``python`` of a command is this interpreter on both sides (named by its path, so that a ``python`` on
PATH without Warp does not make verify exit at once and look cheap). Each program is run once first to
fill Warp's kernel cache, so both timings see warm kernels. A program whose plain run fails, or that
verify could not verify (exit 2), is listed with why and left out of the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = REPO / "tests" / "verify_programs"


def programs() -> list[tuple[str, Path, list[str]]]:
    """(label, cwd, command) of every benchmarked program."""
    out = [
        ("spring_ok", PROGRAMS, ["python", "spring_ok.py"]),
        ("springs (multi-file, -m)", PROGRAMS, ["python", "-m", "springs.train"]),
        ("per_window (buggy)", PROGRAMS, ["python", "per_window.py"]),
        ("per_window --hoisted", PROGRAMS, ["python", "per_window.py", "--hoisted"]),
        ("stochastic", PROGRAMS, ["python", "stochastic.py"]),
        ("cancellation", PROGRAMS, ["python", "cancellation.py"]),
        ("chaotic", PROGRAMS, ["python", "chaotic.py"]),
    ]
    for case in sorted((REPO / "golden").glob("*/case.json")):
        entry = json.loads(case.read_text())["entry"]
        for variant in ("buggy", "fixed"):
            folder = case.parent / variant
            if folder.is_dir():
                out.append((f"{case.parent.name}/{variant}", folder, entry))
    return out


def timed_run(cmd: list[str], cwd: Path, extra_path: Path) -> tuple[float, int]:
    """Wall seconds and exit code of one whole process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(extra_path), os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, done.returncode


def as_typed(cmd: list[str]) -> list[str]:
    """The command with its ``python`` spelled as this interpreter's path."""
    return [sys.executable, *cmd[1:]] if Path(cmd[0]).name.startswith("python") else cmd


def plain_run(cwd: Path, cmd: list[str]) -> tuple[float, int]:
    return timed_run(as_typed(cmd), cwd, cwd)


def verify_run(cwd: Path, cmd: list[str]) -> tuple[float, int]:
    return timed_run([sys.executable, "-m", "warpfix", "verify", "--", *as_typed(cmd)], cwd, REPO)


def median_run(run: Callable[[], tuple[float, int]], repeat: int) -> tuple[float, int]:
    """Median wall seconds of ``repeat`` runs, and the worst exit code among them."""
    results = [run() for _ in range(repeat)]
    return statistics.median(s for s, _ in results), max(c for _, c in results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="only programs whose label contains this text")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per side (the median is kept)")
    args = parser.parse_args()
    rows, left_out = [], 0
    print(f"{'program':44} {'plain s':>8} {'verify s':>9} {'ratio':>6}  exit")
    for label, cwd, cmd in programs():
        if args.only not in label:
            continue
        plain_run(cwd, cmd)  # warm the kernel cache
        plain, plain_code = median_run(lambda c=cwd, m=cmd: plain_run(c, m), args.repeat)
        if plain_code != 0:
            left_out += 1
            print(f"{label:44} {plain:8.2f} {'-':>9} {'-':>6}  plain run failed (exit {plain_code}): left out", flush=True)
            continue
        verify, code = median_run(lambda c=cwd, m=cmd: verify_run(c, m), args.repeat)
        if code == 2:
            left_out += 1
            print(f"{label:44} {plain:8.2f} {verify:9.2f} {'-':>6}  2: could not verify, left out", flush=True)
            continue
        rows.append(verify / plain)
        print(f"{label:44} {plain:8.2f} {verify:9.2f} {verify / plain:6.2f}  {code}", flush=True)
    if rows:
        print(f"\nratio verify/plain: median {statistics.median(rows):.2f}, max {max(rows):.2f}, "
              f"programs <= 2x: {sum(r <= 2.0 for r in rows)}/{len(rows)}")  # fmt: skip
    if left_out:
        print(f"{left_out} program(s) left out: a failed plain run or exit 2 (could not verify)")
    return 1 if left_out and not rows else 0


if __name__ == "__main__":
    sys.exit(main())
