"""Cost of `warpfix verify` against one plain run of the same program (goal: ratio <= 2).

    python bench/verify_cost.py                 # the verify test programs and the golden cases
    python bench/verify_cost.py --only springs  # programs whose label contains a word

Both sides are measured as typed: ``python prog.py`` against ``warpfix verify -- python prog.py``,
each a whole process (interpreter start, imports, ``import warp`` and the verifier's own runs).
Each program is run once first to fill Warp's kernel cache, so both timings see warm kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
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


def plain_run(cwd: Path, cmd: list[str]) -> float:
    exe = [sys.executable, *cmd[1:]] if Path(cmd[0]).name.startswith("python") else cmd
    return timed_run(exe, cwd, cwd)[0]


def verify_run(cwd: Path, cmd: list[str]) -> tuple[float, int]:
    return timed_run([sys.executable, "-m", "warpfix", "verify", "--", *cmd], cwd, REPO)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="only programs whose label contains this text")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per side (the median is kept)")
    args = parser.parse_args()
    rows = []
    print(f"{'program':44} {'plain s':>8} {'verify s':>9} {'ratio':>6}  exit")
    for label, cwd, cmd in programs():
        if args.only not in label:
            continue
        plain_run(cwd, cmd)  # warm the kernel cache
        plain = statistics.median(plain_run(cwd, cmd) for _ in range(args.repeat))
        times, code = [], None
        for _ in range(args.repeat):
            seconds, code = verify_run(cwd, cmd)
            times.append(seconds)
        verify = statistics.median(times)
        rows.append(verify / plain)
        print(f"{label:44} {plain:8.2f} {verify:9.2f} {verify / plain:6.2f}  {code}", flush=True)
    if rows:
        print(f"\nratio verify/plain: median {statistics.median(rows):.2f}, max {max(rows):.2f}, "
              f"programs <= 2x: {sum(r <= 2.0 for r in rows)}/{len(rows)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
