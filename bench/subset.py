"""Subset property of ``check``: a sub-folder's findings are among its package's (issue 11).

    python bench/subset.py newton [--under _src] [--only geometry,sim] [--json OUT] [--whole FILE]

For the installed package P (``newton``, ``warp``) and each immediate sub-folder S of ``P/<under>``
(default ``_src``), ``check S`` must report nothing about S that ``check P`` does not: every
(rule, file, line) of ``check S`` is in ``check P`` with the same severity. A finding of ``check S``
that ``check P`` lacks, or that ``check P`` reports as a warning, appeared only because ``check S``
misses context: a precision bug (a *violation*). A finding of ``check P`` in S that ``check S``
lacks needs callers outside S (a tape in ``P/tests`` that reaches a kernel of S): reported as
*missing*, which the documented policy allows (README, "Checking a sub-folder").

Every check is a fresh ``python -m warpfix check --no-cache --format json`` process run from the
folder that holds P (paths relative, ``newton/_src/...``); its CPU seconds are printed. Run the
whole-package check of newton under the team's lock (``flock .../newton.lock``): it is the heavy one.
``--whole FILE`` reuses a saved JSON document of ``check P`` (from this tool's ``--json`` or
``bench/findings_snapshot.py``) instead of checking P again.
Exit status: 0 when no sub-folder has a violation, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.findings_snapshot import corpus_root, measured  # noqa: E402

Key = tuple[str, str, int]  # (rule, path relative to the folder that holds P, line)


def keyed(findings: Iterable[dict], base: Path) -> dict[Key, str]:
    """(rule, path relative to ``base``, line) -> severity of a JSON report's findings (the most
    severe at one key)."""
    out: dict[Key, str] = {}
    for f in findings:
        key = (f["rule"], os.path.relpath(os.path.join(base, f["path"]), base), int(f["line"]))
        if out.get(key) != "error":
            out[key] = f["severity"]
    return out


def compare(whole: dict[Key, str], part: dict[Key, str], folder: str) -> dict[str, list[Key]]:
    """The violations of ``part`` (the check of ``folder``) against ``whole`` (the check of its
    package): ``extra`` (in the part only), ``stronger`` (an error in the part, a warning in the
    whole); and ``missing`` (in the whole, in ``folder``, not in the part)."""
    inside = {k: v for k, v in whole.items() if _within(k[1], folder)}
    return {
        "extra": sorted(k for k in part if k not in whole),
        "stronger": sorted(k for k, sev in part.items() if k in whole and sev == "error" != whole[k]),
        "missing": sorted(k for k in inside if k not in part),
    }


def _within(path: str, folder: str) -> bool:
    folder = os.path.normpath(folder)
    return path == folder or path.startswith(folder + os.sep)


def check(target: str, cwd: Path) -> tuple[dict, float]:
    """(JSON report, CPU seconds) of ``warpfix check TARGET`` run from ``cwd``."""
    cmd = [sys.executable, "-m", "warpfix", "check", "--no-cache", "--exit-zero", "--format", "json", target]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    code, out, err, stats = measured(cmd, cwd=cwd, env=env)
    if code not in (0, 1, 2) or not out.strip():
        raise SystemExit(f"subset: check of {target} failed ({code}):\n{err[-2000:]}")
    return json.loads(out), stats["cpu_s"]


def sub_folders(root: Path, under: str, only: set[str] | None) -> list[str]:
    """The immediate sub-folders of ``root/under`` that hold Python files, relative to root's parent."""
    base = root / under if under else root
    out = []
    for d in sorted(base.iterdir()):
        if d.is_dir() and not d.name.startswith((".", "__")) and (only is None or d.name in only):
            if any(d.rglob("*.py")):
                out.append(str(d.relative_to(root.parent)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package", help="an installed package (newton, warp)")
    ap.add_argument("--under", default="_src", help="check the immediate sub-folders of this folder of P")
    ap.add_argument("--only", help="comma-separated sub-folder names (default: all)")
    ap.add_argument("--whole", help="a saved JSON report of `check P` to compare against")
    ap.add_argument("--json", help="write the per-folder results here")
    args = ap.parse_args(argv)
    root = corpus_root(args.package)
    cwd = root.parent
    if args.whole:
        whole_doc, cpu = json.loads(Path(args.whole).read_text()), 0.0
    else:
        whole_doc, cpu = check(args.package, cwd)
    whole = keyed(whole_doc["findings"], cwd)
    print(f"check {args.package}: {len(whole)} findings, {cpu:.1f} s CPU")
    results: dict[str, dict] = {}
    bad = 0
    for folder in sub_folders(root, args.under, set(args.only.split(",")) if args.only else None):
        doc, cpu = check(folder, cwd)
        diff = compare(whole, keyed(doc["findings"], cwd), folder)
        results[folder] = {"findings": len(doc["findings"]), "cpu_s": cpu, **diff}
        violations = diff["extra"] + diff["stronger"]
        bad += bool(violations)
        print(f"  {folder}: {len(doc['findings'])} findings ({cpu:.1f} s CPU), "
              f"{len(violations)} violations, {len(diff['missing'])} needing outside callers")
        for kind in ("extra", "stronger"):
            for rule, path, line in diff[kind]:
                print(f"    {kind}: {path}:{line} {rule}")
    if args.json:
        Path(args.json).write_text(json.dumps({"package": args.package, "whole": len(whole),
                                               "folders": results}, indent=1, default=list))
    print(f"{bad} of {len(results)} sub-folders violate the subset property")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
