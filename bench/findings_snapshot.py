"""Findings snapshot: ``warpfix check --no-cache --format json`` on the warp-lang wheel sources and
on newton, sorted and written as JSON (the baseline an optimisation or a merge is compared against).

    python bench/findings_snapshot.py OUT_DIR [--corpus warp|newton ...] [--jobs N]
    python bench/findings_snapshot.py --compare OLD_DIR NEW_DIR

Each corpus is checked by a fresh ``python -m warpfix`` process run from the folder that holds the
package, so paths in the snapshot are relative (``warp/sim/...``) and comparable across machines.
The CPU seconds and peak memory of that process are printed (and kept beside the snapshot).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def corpus_root(name: str) -> Path:
    """The folder of an installed package (found without importing it: importing warp is slow)."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise SystemExit(f"findings_snapshot: package {name!r} is not installed")
    return Path(spec.origin).parent


def run_check(name: str, jobs: int | None) -> tuple[dict, dict]:
    """(the JSON document, {cpu_s, wall_s, peak_mb}) of one check of corpus ``name``."""
    root = corpus_root(name)
    cmd = [sys.executable, "-m", "warpfix", "check", "--no-cache", "--format", "json", name]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    code, out, err, stats = measured(cmd, cwd=root.parent, env=env)
    if code not in (0, 1, 2) or not out.strip():
        raise SystemExit(f"findings_snapshot: check of {name} failed ({code}):\n{err[-2000:]}")
    return json.loads(out), stats


def measured(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str, dict]:
    """Run ``cmd``; (exit code, stdout, stderr, {cpu_s, wall_s, peak_mb}) of that one process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stats = {
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "wall_s": round(wall, 2),
            "peak_mb": round(usage.ru_maxrss / 1024),  # KiB on Linux
        }
        return proc.returncode, out.read().decode(), err.read().decode(), stats


def normalised(doc: dict) -> dict:
    """The parts that must not change, in a stable order."""
    findings = sorted(doc["findings"], key=lambda f: json.dumps(f, sort_keys=True))
    errors = sorted(doc["errors"], key=lambda e: (e["path"], e["message"]))
    return {"files_checked": doc.get("files_checked"), "findings": findings, "errors": errors}


def compare(old_dir: Path, new_dir: Path) -> int:
    """Print the differences between two snapshot folders; exit 1 when any corpus differs."""
    status = 0
    for old in sorted(old_dir.glob("*.json")):
        if old.name.endswith(".stats.json"):
            continue
        new = new_dir / old.name
        if not new.exists():
            print(f"{old.name}: missing in {new_dir}")
            status = 1
            continue
        a, b = json.loads(old.read_text()), json.loads(new.read_text())
        key = lambda f: json.dumps(f, sort_keys=True)  # noqa: E731
        fa, fb = {key(f) for f in a["findings"]}, {key(f) for f in b["findings"]}
        only_old, only_new = sorted(fa - fb), sorted(fb - fa)
        same = not only_old and not only_new and a["errors"] == b["errors"] and a["files_checked"] == b["files_checked"]
        print(f"{old.name}: {'same' if same else 'DIFFERENT'} ({len(fa)} -> {len(fb)} findings)")
        for f in only_old:
            print(f"  - {f}")
        for f in only_new:
            print(f"  + {f}")
        if a["errors"] != b["errors"] or a["files_checked"] != b["files_checked"]:
            print(f"  errors/files_checked differ: {len(a['errors'])}/{a['files_checked']} -> "
                  f"{len(b['errors'])}/{b['files_checked']}")
        status |= 0 if same else 1
    return status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", type=Path, help="folder for <corpus>.json snapshots")
    ap.add_argument("--corpus", action="append", choices=["warp", "newton"], help="default: both")
    ap.add_argument("--jobs", type=int, default=None, help="pass --jobs N to check")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"), help="diff two snapshot folders")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        ap.error("OUT is required")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.corpus or ["warp", "newton"]:
        doc, stats = run_check(name, args.jobs)
        (args.out / f"{name}.json").write_text(json.dumps(normalised(doc), indent=1, sort_keys=True) + "\n")
        (args.out / f"{name}.stats.json").write_text(json.dumps(stats) + "\n")
        print(f"{name}: {len(doc['findings'])} findings, {len(doc['errors'])} errors, "
              f"{doc.get('files_checked')} files; cpu {stats['cpu_s']} s, wall {stats['wall_s']} s, "
              f"peak {stats['peak_mb']} MB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
