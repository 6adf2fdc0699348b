"""What plain ``warpfix apply`` would change in a library's code (issue 11: no file of code that no
tape records may change).

    python bench/apply_libraries.py DIR --scratch D [--json OUT] [--diff]

Copies the ``.py`` files of the package folder DIR (``.../site-packages/warp``, ``newton``,
``mujoco_warp``) to ``D/<name>`` (so nothing installed is touched), runs the fixes ``apply``
would make there (``warpfix.apply.plan_fixes``, safe fixes only, no cache; nothing is written),
and prints per changed file each applied edit: rule, line, whether the finding's code is taped
(``data["taped"]``), and the kernel or function it is in. ``--diff`` prints the unified diffs,
to read each change. The CPU seconds of the run are printed. Whole newton is heavy: run it under
the team's lock.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import resource
import shutil
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from warpfix.apply import Selection, plan_fixes  # noqa: E402


def copy_sources(src: Path, dst: Path) -> int:
    """Copy the ``.py`` files under ``src`` to ``dst``; the number copied."""
    if dst.exists():
        shutil.rmtree(dst)
    count = 0
    for path in src.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        count += 1
    return count


def enclosing_def(text: str, line: int) -> str:
    """The innermost function or class around ``line`` (``module`` when none)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return "?"
    best: tuple[int, str] = (0, "module")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.lineno <= line <= (node.end_lineno or node.lineno) and node.lineno >= best[0]:
                best = (node.lineno, node.name)
    return best[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package", help="the package folder to copy")
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--json")
    ap.add_argument("--diff", action="store_true")
    args = ap.parse_args(argv)
    src = Path(args.package).resolve()
    scratch = Path(args.scratch).resolve()
    out_json = Path(args.json).resolve() if args.json else None
    copied = copy_sources(src, scratch / src.name)
    os.chdir(scratch)
    result = plan_fixes([src.name], selection=Selection(use_cache=False))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    applied = [e for e in result.edits if e.kept]
    by_file: dict[str, list[dict]] = {}
    for e in applied:
        f = e.finding
        by_file.setdefault(f.path, []).append({
            "rule": f.rule, "line": f.line, "severity": f.severity.value, "taped": f.data.get("taped"),
            "in": enclosing_def(result.originals.get(f.path, ""), f.line), "reason": e.reason,
        })
    print(f"{src.name}: {copied} files copied, {len(result.changed)} changed, {len(applied)} edits applied, "
          f"{len(result.errors)} unreadable, {usage.ru_utime + usage.ru_stime:.1f} s CPU")
    untaped = 0
    for path in sorted(result.changed):
        edits = by_file.get(path, [])
        print(f"  {path}")
        for ed in edits:
            untaped += ed["taped"] is False
            print(f"    {ed['rule']} line {ed['line']} in {ed['in']}: taped={ed['taped']} ({ed['severity']}); {ed['reason']}")
        if args.diff:
            sys.stdout.writelines(difflib.unified_diff(
                result.originals[path].splitlines(keepends=True), result.changed[path].splitlines(keepends=True),
                f"a/{path}", f"b/{path}"))
    refused = Counter(e.reason for e in result.edits if not e.kept)
    for reason, n in refused.most_common():
        print(f"  not applied x{n}: {reason[:160]}")
    print(f"{untaped} applied edits in code no tape records")
    if out_json:
        out_json.write_text(json.dumps({"package": src.name, "files": copied, "changed": sorted(result.changed),
                                               "edits": by_file, "errors": result.errors}, indent=1))
    return 1 if untaped else 0


if __name__ == "__main__":
    raise SystemExit(main())
