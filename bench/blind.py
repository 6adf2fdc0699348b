"""Score warpfix on the blind corpus: small differentiable Warp programs with one planted bug each, written
by someone who had not seen warpfix's rules, tests or golden cases (only the bug classes of RULES.md).

    python bench/blind.py                          # check + plain apply on every variant
    python bench/blind.py --programs spring_chain  # one program
    python bench/blind.py --variants pingpong,alias  # variants whose file name holds one of these words
    python bench/blind.py --apply-check            # also `apply --check -- python <variant>` where check hits
    python bench/blind.py --warpfix-tree /tmp/base # another checkout's warpfix (PYTHONPATH), side by side

``bench/blind_corpus/<program>/`` holds a correct ``ok.py`` and the variants (``bug_*.py``, or ``bug_*/``
folders holding a whole copy of a multi-file program, entry ``train.py``); ``manifest.json`` gives each
variant's bug class (1-8, below), the rules its author expected, the planted line, and whether the first
loss is bit for bit ok.py's. Every program prints ``loss <it> <value>`` per iteration and ``grad <name> [...]``
after the first backward.

Per variant, in a scratch copy of its program folder:

1. ``warpfix check``: a hit is an error of a rule of the variant's class (or one its author named) within 2
   lines of the planted line; for a removed statement (class 2, the zero; class 3, the per-frame tape) the
   right rule anywhere in the file;
2. ``warpfix apply`` (safe fixes, no FD): "right" when the fixed program prints exactly what ok.py prints,
   "first iteration right" when it prints ok.py's first loss and gradients (a variant whose own structure
   changes later iterations, such as a state carried across iterations, cannot be fully right), "close" when
   every number it prints equals ok.py's to a relative 1e-5 (right up to float32 summation order: the fixed
   program need not add in ok.py's order);
3. with ``--apply-check``, ``warpfix apply --check -- python <entry>`` on the variants check hit, judged as 2.

Classes: 1 aliased state (``[x] * n``, one state as input and output, swapped buffers), 2 missing
``tape.zero()``/``reset()``, 3 a tape per frame, 4 in-place kernel math, 5 missing ``requires_grad``,
6 optimizer step before the backward or inside the tape, 7 a recorded buffer overwritten before the
backward, 8 NaN-prone guards and doubled launches.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "bench" / "blind_corpus"
OVERWRITES = {f"WF10{i}" for i in range(1, 9)}
CLASS_RULES = {
    1: OVERWRITES, 2: {"WF301"}, 3: {"WF601"}, 4: {"WF106", "WF401", "WF402", "WF107"}, 5: {"WF201"},
    6: {"WF302", "WF303", "WF304"}, 7: OVERWRITES | {"WF303"}, 8: {"WF701", "WF702", "WF502"},
}
ANYWHERE = (2, 3)  # classes whose planted "line" is a removed statement
# Warp's own INFO log on stdout (a program that does not lower wp.config.log_level prints it; `wp.config.quiet`
# does nothing in Warp 1.19): the init banner and its indented lines, and the per-module load lines, whose
# timings (and, after an edit to a kernel, hashes) differ from run to run. Not the program's output.
WARP_BANNER = re.compile(r"Warp \S+ initialized:$")
WARP_MODULE = re.compile(r"Module \S+ \S+ load on device '[^']*' took [\d.]+ ms")


def program_output(out: str) -> str:
    """``out`` without Warp's INFO log lines (unchanged for a program that prints none)."""
    kept, banner = [], False
    for line in out.splitlines(keepends=True):
        banner = bool(WARP_BANNER.match(line)) or (banner and line.startswith(" "))
        if not banner and not WARP_MODULE.match(line):
            kept.append(line)
    return "".join(kept)


class Runner:
    """warpfix (this checkout's, or another tree's) and the programs, in scratch copies."""

    def __init__(self, tree: Path | None, work: Path) -> None:
        self.env = {**os.environ, "PYTHONPATH": str(tree or REPO)}
        self.work = work

    def warpfix(self, folder: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "warpfix", *args], cwd=folder, capture_output=True, text=True,
                              env=self.env, timeout=timeout, check=False)

    def run(self, folder: Path, entry: str) -> tuple[int, str]:
        p = subprocess.run([sys.executable, entry], cwd=folder, capture_output=True, text=True, env=self.env,
                           timeout=600, check=False)
        return p.returncode, program_output(p.stdout)

    def copy(self, corpus: Path, program: str, file: str, name: str) -> tuple[Path, str]:
        """A scratch folder holding the variant (entry file name) with the program's other modules."""
        dest = self.work / program / name
        shutil.rmtree(dest, ignore_errors=True)
        src = corpus / program
        if (src / file).is_dir():
            shutil.copytree(src / file, dest)
            return dest, "train.py" if (dest / "train.py").exists() else "ok.py"
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("bug_*", "__pycache__", "ok.py"))
        shutil.copy(src / file, dest / file)
        return dest, file


def first_iteration(out: str) -> list[str]:
    """The first iteration's printed lines (its loss and gradients), before the second loss."""
    lines = out.splitlines()
    return lines[: next((i for i, line in enumerate(lines) if line.startswith("loss 1")), len(lines))]


def close(out: str, ok_out: str, rtol: float = 1e-5) -> bool:
    """Every line ok.py prints, its numbers equal to ``rtol`` (float32 sums taken in another order): a fix right
    up to rounding, where the exact comparison asks for ok.py's own order of operations."""
    a, b = out.splitlines(), ok_out.splitlines()
    if len(a) != len(b):
        return False
    for la, lb in zip(a, b, strict=True):
        ta, tb = la.replace("[", " ").replace("]", " ").split(), lb.replace("[", " ").replace("]", " ").split()
        if len(ta) != len(tb):
            return False
        for x, y in zip(ta, tb, strict=True):
            if x == y:
                continue
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                return False
            if not math.isclose(fx, fy, rel_tol=rtol, abs_tol=1e-9):
                return False
    return True


def _near(finding: dict, line: int) -> bool:
    """The planted line lies within 2 lines of the finding's span (a multi-line launch whose argument line was
    changed is one statement), as ``bench/mutate.py`` scores."""
    last = max(finding["line"], finding.get("end_line") or finding["line"])
    return finding["line"] - 2 <= line <= last + 2


def score(runner: Runner, corpus: Path, entry: dict, ok_out: str, apply_check: bool) -> dict:
    folder, main = runner.copy(corpus, entry["program"], entry["file"], Path(entry["file"]).stem)
    found = json.loads(runner.warpfix(folder, "check", "--no-cache", "--output-format", "json", ".").stdout or "{}")
    findings = found.get("findings", [])
    rules = set(entry["rules"]) | CLASS_RULES[entry["class"]]
    hit = any(f["severity"] == "error" and f["rule"] in rules
              and (entry["class"] in ANYWHERE or _near(f, entry["line"])) for f in findings)
    row = {"case": f"{entry['program']}/{entry['file']}", "class": entry["class"], "hit": hit,
           "findings": [f"{f['rule']}:{f['line']}:{f['severity']}" for f in findings]}
    for mode in ("apply", "apply_check") if apply_check and hit else ("apply",):
        fixed = runner.work / entry["program"] / f"{Path(entry['file']).stem}_{mode}"
        shutil.rmtree(fixed, ignore_errors=True)
        shutil.copytree(folder, fixed)
        extra = ["--check", ".", "--", sys.executable, main] if mode == "apply_check" else ["."]
        runner.warpfix(fixed, "apply", "--no-cache", *extra, timeout=3600)
        changed = any((fixed / p.relative_to(folder)).read_text(encoding="utf-8") != p.read_text(encoding="utf-8")
                      for p in folder.rglob("*.py"))
        rc, out = runner.run(fixed, main)
        row[f"{mode}_right"] = changed and rc == 0 and out == ok_out
        row[f"{mode}_first"] = changed and rc == 0 and first_iteration(out) == first_iteration(ok_out)
        row[f"{mode}_close"] = changed and rc == 0 and close(out, ok_out)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--programs", default="", help="comma-separated program names (default: all)")
    parser.add_argument("--variants", default="",
                        help="comma-separated words; only variants whose file name contains one (default: all)")
    parser.add_argument("--apply-check", action="store_true", help="also run apply --check where check hits")
    parser.add_argument("--warpfix-tree", type=Path, default=None, help="score another checkout's warpfix")
    parser.add_argument("--json", type=Path, default=None, help="write every row here")
    args = parser.parse_args()
    manifest = json.loads((args.corpus / "manifest.json").read_text(encoding="utf-8"))
    wanted = {p for p in args.programs.split(",") if p}
    words = [w for w in args.variants.split(",") if w]
    with tempfile.TemporaryDirectory(prefix="warpfix-blind-") as tmp:
        runner = Runner(args.warpfix_tree, Path(tmp))
        oks = {}
        for e in manifest:
            if e["class"] == 0 and (not wanted or e["program"] in wanted):
                folder, main_file = runner.copy(args.corpus, e["program"], e["file"], "ok")
                oks[e["program"]] = runner.run(folder, main_file)[1]
                found = json.loads(runner.warpfix(folder, "check", "--no-cache", "--output-format", "json",
                                                  ".").stdout or "{}").get("findings", [])
                errors = [f for f in found if f["severity"] == "error"]
                print(f"ok {e['program']}: {len(found)} finding(s), {len(errors)} error(s)", flush=True)
        rows = []
        for e in manifest:
            if e["class"] == 0 or e["program"] not in oks or (words and not any(w in e["file"] for w in words)):
                continue
            rows.append(score(runner, args.corpus, e, oks[e["program"]], args.apply_check))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    cols = ["hit", "apply_right", "apply_first", "apply_close"] + (
        ["apply_check_right", "apply_check_first", "apply_check_close"] if args.apply_check else [])
    print(f"\n{'class':<6}{'variants':>9}" + "".join(f"{c:>19}" for c in cols))
    for cls in sorted({r["class"] for r in rows}) + ["all"]:
        sel = [r for r in rows if cls == "all" or r["class"] == cls]
        print(f"{cls!s:<6}{len(sel):>9}" + "".join(f"{sum(bool(r.get(c)) for r in sel):>19}" for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
