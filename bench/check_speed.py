"""Speed of `warpfix check`, printed side by side in one run (a benchmark, not a test).

(a) ast.parse of every file, (b) bare libcst parse of every file, (c) warpfix check cold
(no cache), (d) warpfix check warm (cache hit), (e) editor latency: a changed 1000-line
Warp file to its diagnostics (in memory, as the language server does), plus the cost of
files that cannot hold a gradient bug. Ratios are printed against (b).

    python bench/check_speed.py [PATH] [--limit N] [--skip-libcst]
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import libcst

from warpfix.engine import check_paths, check_sources, discover, read_source


def default_target() -> str:
    import importlib.util

    spec = importlib.util.find_spec("warp")
    assert spec is not None and spec.origin is not None
    return os.path.dirname(spec.origin)


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def editor_file(n_lines: int = 1000) -> str:
    """A 1000-line Warp training script: kernels, a tape, a training loop (realistic shape)."""
    blocks = ["import warp as wp\n\n"]
    i = 0
    while sum(b.count("\n") for b in blocks) < n_lines - 30:
        blocks.append(
            f"@wp.kernel\n"
            f"def step_{i}(x: wp.array(dtype=float), v: wp.array(dtype=float), y: wp.array(dtype=float)):\n"
            f"    tid = wp.tid()\n"
            f"    a = x[tid] * 0.5 + v[tid]\n"
            f"    if a > 1.0:\n"
            f"        a = 1.0\n"
            f"    y[tid] = a\n\n\n"
        )
        i += 1
    blocks.append(
        "def train(n):\n"
        "    v = wp.zeros(n, dtype=float, requires_grad=True)\n"
        "    loss = wp.zeros(1, dtype=float, requires_grad=True)\n"
        "    for it in range(10):\n"
        "        xs = [wp.zeros(n, dtype=float, requires_grad=True) for _ in range(4)]\n"
        "        tape = wp.Tape()\n"
        "        with tape:\n"
        + "".join(
            f"            wp.launch(step_{k}, n, inputs=[xs[{k % 3}], v], outputs=[xs[{k % 3 + 1}]])\n"
            for k in range(min(i, 12))
        )
        + "        tape.backward(loss)\n"
        "        tape.zero()\n"
    )
    return "".join(blocks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=None)
    ap.add_argument("--limit", type=int, default=0, help="only the first N files (quick runs)")
    ap.add_argument("--skip-libcst", action="store_true", help="skip (b): it takes minutes on the full tree")
    args = ap.parse_args()
    target = args.path or default_target()

    files, _ = discover([target])
    files = [f for f in files if f.endswith(".py")]
    if args.limit:
        files = files[: args.limit]
    texts = {}
    for f in files:
        text, _ = read_source(f)
        if text is not None:
            texts[f] = text
    relevant = [f for f, t in texts.items() if "warp" in t]
    lines = sum(t.count("\n") for t in texts.values())
    print(f"target: {target}\nfiles: {len(texts)} ({lines} lines); mention warp: {len(relevant)}")

    def parse_all_ast() -> None:
        for f, t in texts.items():
            try:
                ast.parse(t, filename=f)
            except SyntaxError:
                pass

    def parse_all_libcst() -> None:
        for t in texts.values():
            try:
                libcst.parse_module(t)
            except libcst.ParserSyntaxError:
                pass

    t_ast, _ = timed(parse_all_ast)
    t_cst = None if args.skip_libcst else timed(parse_all_libcst)[0]

    work = Path(tempfile.mkdtemp(prefix="warpfix-bench-"))
    try:
        tree = work / "src"
        tree.mkdir()
        for f, t in texts.items():
            dest = tree / os.path.relpath(f, target)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(t, encoding="utf-8")
        cwd = os.getcwd()
        os.chdir(work)
        try:
            t_cold, cold = timed(lambda: check_paths(["src"], use_cache=True))
            t_warm, warm = timed(lambda: check_paths(["src"], use_cache=True))
        finally:
            os.chdir(cwd)
        assert warm.cached and [f.to_json() for f in warm.findings] == [f.to_json() for f in cold.findings]

        # files that cannot hold a gradient bug: the same count of plain-Python files
        plain = {f"plain_{i}.py": "import os\n" + "def f(x):\n    return x + 1\n" * 40 for i in range(len(texts))}
        t_plain, _ = timed(lambda: check_sources(plain))

        src = editor_file()
        check_sources({"edited.py": src})  # warm the rule registry and imports
        lat = []
        for k in range(5):
            changed = src.replace("a = x[tid] * 0.5", f"a = x[tid] * 0.{k + 1}", 1)
            lat.append(timed(lambda c=changed: check_sources({"edited.py": c}))[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base = t_cst
    print()
    print(f"{'measure':<46}{'seconds':>10}{'x libcst parse':>16}")

    def row(name: str, t: float) -> None:
        ratio = f"{t / base:.2f}" if base else "-"
        print(f"{name:<46}{t:>10.2f}{ratio:>16}")

    row("(a) ast.parse, every file", t_ast)
    if t_cst is not None:
        row("(b) bare libcst parse, every file", t_cst)
    row(f"(c) warpfix check, cold ({len(cold.findings)} findings)", t_cold)
    row("(d) warpfix check, warm (cache hit)", t_warm)
    row(f"    {len(plain)} files without warp (check_sources)", t_plain)
    print(f"{'(e) editor: changed 1000-line file -> diagnostics':<46}{statistics.median(lat):>10.3f}"
          f"{'(median of 5)':>16}")
    print(f"\ncold/warm: {t_cold / max(t_warm, 1e-9):.1f}x; cold/ast.parse: {t_cold / t_ast:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
