"""Run warpfix end to end on the bundled buggy project: the findings, the diff, FD before and after,
and the training loss before and after. The project is copied to a scratch folder first.

    python -m warpfix.demo [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.rule import Rule
from rich.table import Table

EXAMPLE = Path(__file__).resolve().parent / "example"
ENTRY = ["python", "train.py"]
console = Console(highlight=False)


def step(title: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    console.print(Rule(f"[bold]{title}"))
    console.print(f"[dim]$ {' '.join(args)}[/dim]")
    if args[0] == "warpfix":
        cmd = [sys.executable, "-m", "warpfix", *args[1:]]
    else:
        cmd = [sys.executable if a == "python" else a for a in args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "110"})
    out = (proc.stdout + proc.stderr).rstrip()
    console.print(out, markup=False, highlight=False)
    console.print(f"[dim](exit code {proc.returncode})[/dim]\n")
    return proc


def losses(output: str) -> list[float]:
    return [float(m.group(1)) for m in re.finditer(r"iteration\s+\d+\s+loss\s+([-0-9.eE+]+)", output)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", metavar="DIR", help="work in DIR (kept afterwards) instead of a temporary folder")
    args = ap.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="warpfix-demo-"))
    project = work / "project"
    if project.exists():
        shutil.rmtree(project)
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".warpfix_cache"))
    console.print(f"[bold]warpfix demo[/bold]: a particle-throwing calibration in {project}\n"
                  "(sim.py simulates, train.py optimises the launch velocities)\n")
    try:
        before = step("1. The training as written: the loss does not go down", ENTRY, project)
        step("2. warpfix check: what is wrong, where, and how safe the fix is", ["warpfix", "check", "."], project)
        step("3. warpfix apply --diff: the rewrites (nothing is written)", ["warpfix", "apply", "--diff", "."],
             project)
        step("4. warpfix verify: finite differences on the original program", ["warpfix", "verify", "--", *ENTRY],
             project)
        step("5. warpfix apply --check: each edit is kept only if FD then agrees and the forward is unchanged",
             ["warpfix", "apply", "--check", "--", *ENTRY], project)
        step("6. warpfix verify: finite differences on the rewritten program", ["warpfix", "verify", "--", *ENTRY],
             project)
        after = step("7. The training after the fixes", ENTRY, project)
        step("8. warpfix check again", ["warpfix", "check", "."], project)
        table = Table(title="training loss, before and after warpfix")
        table.add_column("iteration", justify="right")
        table.add_column("before", justify="right")
        table.add_column("after", justify="right")
        lb, la = losses(before.stdout), losses(after.stdout)
        for i in range(max(len(lb), len(la))):
            table.add_row(str(i), f"{lb[i]:.6f}" if i < len(lb) else "", f"{la[i]:.6f}" if i < len(la) else "")
        console.print(table)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
