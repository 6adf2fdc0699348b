"""`warpfix check` and `warpfix verify` on real differentiable programs nobody on the team wrote.

    python bench/realworld.py                    # newton's diffsim examples + the Warp wheel's CPU ones
    python bench/realworld.py --only ball drone  # programs whose label contains a word
    python bench/realworld.py --timeout 900      # verify time limit per program (seconds)
    python bench/realworld.py --extra-path /tmp/pylib  # a folder on the programs' PYTHONPATH (pxr, nlopt)
    python bench/realworld.py --long             # the Warp examples at a longer training length (20-40 iterations)

Per program: static findings (rule counts, errors), verify verdicts, and wall time of the example
alone against verify (after one plain run has filled Warp's kernel cache). The examples run with
small arguments (`--num-frames 3`-like) on the CPU. Nothing here is edited: programs run from
site-packages as installed.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from warpfix.verify import run_verify  # noqa: E402

NEWTON = ["ball", "bear", "cloth", "drone", "soft_body", "spring_cage"]
NEWTON_ARGS = ["--viewer", "null", "--num-frames", "3", "--device", "cpu"]
#: Extra arguments per newton example: bear simulates 300 steps of 80 substeps per iteration by default
#: (minutes per frame on the CPU); two steps still run its whole forward, backward and update.
NEWTON_EXTRA = {"bear": ["--sim-steps", "2"]}
#: Warp wheel examples: (file under warp/examples, small arguments).
WARP = [
    ("optim/example_particle_repulsion.py", ["--num-frames", "3", "--device", "cpu"]),
    ("optim/example_diffray.py", ["--train-iters", "2", "--headless", "--device", "cpu"]),
    # the default 1000 frames on a 128x128 grid run for over ten minutes on the CPU
    ("optim/example_fluid_checkpoint.py",
     ["--train-iters", "2", "--num-frames", "8", "--pressure-iterations", "10", "--headless", "--device", "cpu"]),
    ("optim/example_fluid_checkpoint_custom_backward.py",
     ["--train-iters", "2", "--num-frames", "8", "--pressure-iterations", "10", "--segment-size", "4", "--headless",
      "--device", "cpu"]),
    ("optim/example_navier_stokes_perturbation.py",
     ["--train-iters", "2", "--spin-up-steps", "5", "--lead-steps", "5", "--headless", "--device", "cpu"]),
    ("fem/example_elastic_shape_optimization.py", ["--num-iters", "2", "--headless", "--device", "cpu"]),
    ("fem/example_darcy_ls_optimization.py", ["--num-iters", "2", "--resolution", "25", "--headless", "--device", "cpu"]),
    ("fem/example_cantilever_topology_optimization.py",
     ["--max-evals", "2", "--nx", "8", "--ny", "4", "--headless", "--device", "cpu"]),
]

#: ``--long``: the Warp examples at a training length closer to their own (their defaults run for minutes to hours
#: on the CPU): what a user pays to verify a real run, where the FD floor is a small part of it
WARP_LONG = {
    "optim/example_diffray.py": ["--train-iters", "20", "--headless", "--device", "cpu"],
    "optim/example_fluid_checkpoint.py":
        ["--train-iters", "20", "--num-frames", "8", "--pressure-iterations", "10", "--headless", "--device", "cpu"],
    "fem/example_elastic_shape_optimization.py": ["--num-iters", "40", "--headless", "--device", "cpu"],
    "fem/example_darcy_ls_optimization.py": ["--num-iters", "40", "--resolution", "25", "--headless", "--device", "cpu"],
    "fem/example_cantilever_topology_optimization.py": ["--max-evals", "40", "--headless", "--device", "cpu"],
}


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    return Path(spec.origin).parent if spec and spec.origin else None


def programs(long: bool = False) -> list[tuple[str, Path, list[str]]]:
    """(label, source file, command) of each program that is installed (``long``: the Warp examples of
    :data:`WARP_LONG` at their longer length, and nothing else)."""
    out = []
    newton = _package_dir("newton")
    if newton is not None and not long:
        for name in NEWTON:
            src = newton / "examples" / "diffsim" / f"example_diffsim_{name}.py"
            out.append((f"newton {name}", src, [sys.executable, str(src), *NEWTON_ARGS, *NEWTON_EXTRA.get(name, [])]))
    warp = _package_dir("warp")
    if warp is not None:
        for rel, args in WARP:
            if long:
                if rel not in WARP_LONG:
                    continue
                args = WARP_LONG[rel]
            src = warp / "examples" / rel
            if src.exists():
                out.append((f"warp {Path(rel).stem.removeprefix('example_')}", src, [sys.executable, str(src), *args]))
    return out


def check(src: Path) -> tuple[str, int]:
    """Rule counts of `warpfix check` on one file, and its number of errors."""
    proc = subprocess.run(
        [sys.executable, "-m", "warpfix", "check", "--format", "json", "--no-cache", str(src)],
        capture_output=True, text=True, cwd=str(src.parent),
    )  # fmt: skip
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return f"check failed: {proc.stderr.strip().splitlines()[-1:]}", 0
    findings = doc["findings"] if isinstance(doc, dict) else doc
    counts = collections.Counter(f["rule"] for f in findings)
    errors = sum(f["severity"] == "error" for f in findings)
    return " ".join(f"{r}x{n}" for r, n in sorted(counts.items())) or "-", errors


def run_alone(cmd: list[str], cwd: Path, timeout: float) -> tuple[float | None, str]:
    """Wall seconds of one plain run (None when it fails or times out), and the last line it printed."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=str(cwd), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out at {timeout:.0f} s"
    last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
    return (time.perf_counter() - started if proc.returncode == 0 else None), last[0][:160]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="labels containing one of these words")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run (alone and verify)")
    parser.add_argument("--extra-path", default="", help="a folder put on the programs' PYTHONPATH (e.g. pxr, nlopt)")
    parser.add_argument("--long", action="store_true", help="the Warp examples at a longer training length only")
    args = parser.parse_args()
    if args.extra_path:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [args.extra_path, os.environ.get("PYTHONPATH")]))
    env_cache = os.environ.setdefault("WARP_CACHE_PATH", str(Path.home() / ".cache" / "warpfix-tests-warp"))
    print(f"# kernel cache {env_cache}; python {sys.executable}")
    for label, src, cmd in programs(args.long):
        if args.only and not any(w in label for w in args.only):
            continue
        rules, errors = check(src)
        run_alone(cmd, src.parent, args.timeout)  # fills the kernel cache
        alone, last_line = run_alone(cmd, src.parent, args.timeout)
        started = time.perf_counter()
        report = run_verify(cmd, cwd=str(src.parent), timeout=args.timeout)
        took = time.perf_counter() - started
        verdicts = collections.Counter(p.verdict for b in report.backwards for p in b.params)
        losses = ", ".join(f"{b.loss:.6g}" for b in report.backwards if b.params and b.loss is not None)
        vf = collections.Counter(
            f"{f.rule}{'->' + f.data['classified_as'] if f.data.get('classified_as') else ''}" for f in report.findings
        )
        v_errors = sum(f.severity.value == "error" for f in report.findings)
        alone_s = f"{alone:.1f}s" if alone is not None else f"failed ({last_line})"
        print(f"== {label}")
        print(f"   check:  {rules} ({errors} error(s))")
        if report.error:
            print(f"   verify: could not verify: {report.error.splitlines()[0]}")
        print(f"   verify: {dict(verdicts) or '-'} on loss(es) [{losses}]; findings "
              f"{' '.join(f'{k}x{n}' for k, n in sorted(vf.items())) or '-'} ({v_errors} error(s)); exit {report.exit_code}")  # fmt: skip
        unjudged = next((p for b in report.backwards for p in b.params if p.verdict == "unreliable"), None)
        if unjudged is not None:
            print(f"   unreliable {unjudged.name}: {unjudged.reason[:160]}")
        ratio = f" ({took / alone:.2f}x)" if alone else ""
        print(f"   time:   alone {alone_s}, verify {took:.1f}s{ratio}; probe {report.probe_seconds or '-'}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
