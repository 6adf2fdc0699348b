"""What a user pays for warpfix, side by side in one run (a benchmark, not a test).

Every figure is one whole process measured from outside (CPU = user + system seconds of the
process and the processes it waited for, peak = its largest resident set), so start-up, imports
and worker processes are included:

* per corpus (warp's sources, newton): ruff, ``ast.parse`` of every file, ``warpfix check`` cold
  (no cache) and warm (second run, cache hit), and a cold check of two copies of the tree;
* ``warpfix --version``;
* editor latency from a real stdio LSP client (pygls) to ``warpfix lsp``: one-line change ->
  diagnostics of that version, median, in three situations built from warp's/newton's sources in
  a temp folder (a ~960-line file alone; a file among 93 other Warp files in its folder; a
  1133-line file with 4 fixable findings);
* ``warpfix verify -- python prog.py`` and ``warpfix apply --check -- python main.py`` against
  the plain ``python`` run of the same program (both sides warm Warp's kernel cache first).

``--baseline REPO`` runs every warpfix figure a second time with the warpfix of another checkout
(before/after in one table).

    python bench/check_speed.py [--corpus warp|newton ...] [--baseline REPO] [--skip-lsp] [--skip-run]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SITE = Path(__import__("sysconfig").get_paths()["purelib"])
ALONE = "newton/_src/solvers/kamino/_src/linalg/conjugate.py"  # 966 lines, imports warp
IN_FOLDER = "warp/tests/matrix/test_mat_constructors.py"  # 966 lines; neighbours from warp/tests
NEIGHBOURS_FROM = "warp/tests"
FIXABLE = "newton/tests/test_deformable_visual_mesh.py"  # 1133 lines
EDITS = 5  # one-line changes per editor situation


@dataclass
class Usage:
    cpu: float
    wall: float
    peak_mb: float
    code: int


def measure(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Usage:
    """Run ``cmd`` to its end, output discarded; its CPU, wall time and peak memory."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Usage(ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss / 1024, proc.returncode)


def warpfix_env(repo: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])))


def warpfix(*args: str) -> list[str]:
    """A warpfix command line (which checkout runs it is chosen by :func:`warpfix_env`)."""
    return [sys.executable, "-m", "warpfix", *args]


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []

    def add(self, what: str, u: Usage | None, note: str = "") -> None:
        if u is None:
            self.rows.append((what, "-", "-", "-", note))
            return
        self.rows.append((what, f"{u.cpu:.2f}", f"{u.wall:.2f}", f"{u.peak_mb:.0f}", note))
        print(f"  {what}: cpu {u.cpu:.2f} s, wall {u.wall:.2f} s, peak {u.peak_mb:.0f} MB {note}", flush=True)

    def text(self) -> str:
        head = ("measure", "CPU s", "wall s", "peak MB", "note")
        widths = [max(len(r[i]) for r in [head, *self.rows]) for i in range(5)]
        lines = ["  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                 for r in [head, *self.rows]]
        return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


PARSE_ALL = """
import ast, os, sys
for root, dirs, names in os.walk(sys.argv[1]):
    dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
    for n in sorted(names):
        if n.endswith(".py"):
            with open(os.path.join(root, n), "rb") as fh:
                data = fh.read()
            try:
                ast.parse(data)
            except (SyntaxError, ValueError):
                pass
"""


def bench_corpus(name: str, repos: dict[str, Path], table: Table, work: Path, copies_for_baseline: bool) -> None:
    root = SITE / name
    files = sum(1 for _ in root.rglob("*.py"))
    print(f"{name}: {root} ({files} files)", flush=True)
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    table.add(f"{name}: ruff check", measure([ruff, "check", "--no-cache", "--isolated", "--exit-zero", "-q",
                                              str(root)], work))
    parse = measure([sys.executable, "-c", PARSE_ALL, str(root)], work)
    table.add(f"{name}: ast.parse, every file", parse)
    copies = work / f"two-{name}"
    for k in ("a", "b"):
        shutil.copytree(root, copies / k / name, ignore=shutil.ignore_patterns("__pycache__"))
    edited = work / f"edited-{name}"
    shutil.copytree(root, edited / name, ignore=shutil.ignore_patterns("__pycache__"))
    for label, repo in repos.items():
        cwd = work / f"cache-{label}-{name}"
        cwd.mkdir()
        # cold: no result cache (a new folder) and no file-summary cache (a new user cache folder,
        # which the installed packages' summaries are copied into: a user has those from the first run)
        env = {**warpfix_env(repo), "WARPFIX_CACHE_DIR": str(fresh_cache_dir(work, f"{label}-{name}"))}
        cold = measure(warpfix("check", "--format", "json", str(root)), cwd, env)
        table.add(f"{name}: warpfix check cold [{label}]", cold, f"{cold.cpu / parse.cpu:.1f}x ast.parse")
        warm = measure(warpfix("check", "--format", "json", str(root)), cwd, env)
        table.add(f"{name}: warpfix check warm [{label}]", warm)
        # after a one-line edit of one file: the result cache misses, the other files' summaries hit
        measure(warpfix("check", "--format", "json", name), edited, env)
        target = edited / name / ("__init__.py" if (edited / name / "__init__.py").exists() else "")
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(f"\n# edited by the benchmark ({label})\n")
        after = measure(warpfix("check", "--format", "json", name), edited, env)
        table.add(f"{name}: warpfix check after a one-line edit [{label}]", after,
                  f"{after.cpu / cold.cpu:.2f}x cold")
        if label == "this" or copies_for_baseline:
            two = measure(warpfix("check", "--no-cache", "--format", "json", "a", "b"), copies, env)
            table.add(f"{name}: two copies, cold [{label}]", two, f"{two.cpu / cold.cpu:.2f}x one copy")


def fresh_cache_dir(work: Path, label: str) -> Path:
    """A user cache folder with no file summaries, holding the installed packages' summaries the
    user's own folder holds (``warpfix/library``: written at a user's first check, kept after)."""
    folder = work / f"user-cache-{label}"
    base = os.environ.get("WARPFIX_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "warpfix", "library")
    if os.path.isdir(base):
        shutil.copytree(base, folder, ignore=shutil.ignore_patterns("files"))
    else:
        folder.mkdir()
    return folder


# -- editor ---------------------------------------------------------------------------------------
def fixable_block() -> str:
    """Four independent WF201 findings (a safe fix each): buffers read on the way to the loss
    allocated without requires_grad."""
    out = ["\n\n# --- benchmark: four fixable findings ---\n"]
    for k in range(4):
        out.append(
            f"@wp.kernel\n"
            f"def bench_scale_{k}(x: wp.array(dtype=float), s: wp.array(dtype=float), y: wp.array(dtype=float)):\n"
            f"    i = wp.tid()\n"
            f"    y[i] = s[0] * x[i]\n\n\n"
            f"@wp.kernel\n"
            f"def bench_loss_{k}(y: wp.array(dtype=float), loss: wp.array(dtype=float)):\n"
            f"    i = wp.tid()\n"
            f"    wp.atomic_add(loss, 0, y[i] * y[i])\n\n\n"
            f"def bench_fit_{k}(n: int):\n"
            f"    x = wp.ones(n, dtype=float)\n"
            f"    s = wp.ones(1, dtype=float, requires_grad=True)\n"
            f"    loss = wp.zeros(1, dtype=float, requires_grad=True)\n"
            f"    y = wp.zeros(n, dtype=float)\n"
            f"    tape = wp.Tape()\n"
            f"    with tape:\n"
            f"        wp.launch(bench_scale_{k}, dim=n, inputs=[x, s], outputs=[y])\n"
            f"        wp.launch(bench_loss_{k}, dim=n, inputs=[y], outputs=[loss])\n"
            f"    tape.backward(loss)\n\n"
        )
    return "".join(out)


def editor_situations(work: Path) -> list[tuple[str, Path]]:
    alone = work / "alone" / "conjugate.py"
    alone.parent.mkdir(parents=True)
    shutil.copy(SITE / ALONE, alone)
    folder = work / "folder"
    folder.mkdir()
    target = folder / Path(IN_FOLDER).name
    shutil.copy(SITE / IN_FOLDER, target)
    others = sorted(p for p in (SITE / NEIGHBOURS_FROM).glob("*.py")
                    if "import warp" in p.read_text(encoding="utf-8", errors="replace"))
    for p in others[:93]:
        shutil.copy(p, folder / p.name)
    fixable = work / "fixable" / Path(FIXABLE).name
    fixable.parent.mkdir()
    fixable.write_text((SITE / FIXABLE).read_text(encoding="utf-8") + fixable_block(), encoding="utf-8")
    return [
        (f"a {line_count(alone)}-line file alone", alone),
        (f"a {line_count(target)}-line file among {len(list(folder.glob('*.py'))) - 1} Warp files", target),
        (f"a {line_count(fixable)}-line file, 4 fixable findings", fixable),
    ]


def line_count(p: Path) -> int:
    return p.read_text(encoding="utf-8").count("\n")


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def editor_latency(repo: Path, path: Path) -> tuple[float, float, int]:
    """Median wall seconds from a one-line change to the diagnostics of that version, median CPU
    seconds the server spent on it (robust to a loaded machine), and the diagnostics count."""
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("warpfix-bench", "1")
    arrived: dict[int, asyncio.Event] = {}
    counts: dict[int, int] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def diagnostics(params: types.PublishDiagnosticsParams) -> None:
        if params.version is not None:
            counts[params.version] = len(params.diagnostics)
            arrived.setdefault(params.version, asyncio.Event()).set()

    await client.start_io(sys.executable, "-m", "warpfix", "lsp", env=warpfix_env(repo), cwd=str(path.parent))
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(
                data_support=True, resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"])
            ))),
        root_uri=path.parent.as_uri(),
    ))
    client.initialized(types.InitializedParams())
    uri = path.as_uri()
    text = path.read_text(encoding="utf-8")
    arrived[1] = asyncio.Event()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    await asyncio.wait_for(arrived[1].wait(), 600)
    times, cpus = [], []
    pid = client._server.pid  # type: ignore[union-attr]
    lines = text.splitlines(keepends=True)
    for k in range(EDITS):
        version = k + 2
        arrived[version] = asyncio.Event()
        edited = "".join([*lines, f"BENCH_EDIT = {k}\n"])  # a one-line change at the end
        start, cpu = time.perf_counter(), process_cpu(pid)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)]))
        await asyncio.wait_for(arrived[version].wait(), 600)
        times.append(time.perf_counter() - start)
        cpus.append(process_cpu(pid) - cpu)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return statistics.median(times), statistics.median(cpus), counts.get(EDITS + 1, -1)


def bench_editor(repos: dict[str, Path], work: Path, rows: list[str]) -> None:
    for what, path in editor_situations(work):
        for label, repo in repos.items():
            median, cpu, n = asyncio.run(editor_latency(repo, path))
            row = (f"editor: {what} [{label}]: median {median:.3f} s wall, {cpu:.3f} s server CPU, "
                   f"of {EDITS} changes ({n} diagnostics)")
            print("  " + row, flush=True)
            rows.append(row)


# -- runs as typed --------------------------------------------------------------------------------
def bench_runs(repos: dict[str, Path], table: Table, work: Path) -> None:
    prog = REPO / "tests" / "verify_programs"
    golden = REPO / "golden" / "WF201-missing-requires-grad" / "buggy"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(prog), os.environ.get("PYTHONPATH")])))
    measure([sys.executable, "spring_ok.py"], prog, env)  # fill Warp's kernel cache
    plain = measure([sys.executable, "spring_ok.py"], prog, env)
    table.add("python spring_ok.py (plain)", plain)
    for label, repo in repos.items():
        # the program runs in this interpreter (the one with warp), as a user names their own
        v = measure(warpfix("verify", "--", sys.executable, "spring_ok.py"), prog, {**warpfix_env(repo)})
        table.add(f"warpfix verify -- python spring_ok.py [{label}]", v,
                  f"{v.wall / plain.wall:.2f}x plain wall, exit {v.code}")
    case = work / "golden-plain"
    shutil.copytree(golden, case)
    measure([sys.executable, "main.py"], case)
    plain = measure([sys.executable, "main.py"], case)
    table.add("python main.py (WF201 golden, plain)", plain)
    for label, repo in repos.items():
        copy = work / f"golden-{label}"
        shutil.copytree(golden, copy)
        a = measure(warpfix("apply", "--check", "--", sys.executable, "main.py"), copy, warpfix_env(repo))
        table.add(f"warpfix apply --check -- python main.py [{label}]", a,
                  f"{a.wall / plain.wall:.2f}x plain wall, exit {a.code}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", choices=["warp", "newton"], help="default: both")
    ap.add_argument("--baseline", type=Path, help="another warpfix checkout, measured beside this one")
    ap.add_argument("--skip-lsp", action="store_true")
    ap.add_argument("--copies-for-baseline", action="store_true", help="also check two copies with the baseline")
    ap.add_argument("--skip-run", action="store_true", help="skip verify / apply --check")
    ap.add_argument("--skip-corpus", action="store_true", help="skip ruff / ast.parse / check")
    args = ap.parse_args()
    repos = {"this": REPO}
    if args.baseline:
        repos = {"before": args.baseline.resolve(), "this": REPO}
    table = Table()
    editor_rows: list[str] = []
    work = Path(tempfile.mkdtemp(prefix="warpfix-bench-"))
    try:
        for label, repo in repos.items():
            table.add(f"warpfix --version [{label}]", measure(warpfix("--version"), work, warpfix_env(repo)))
        for name in [] if args.skip_corpus else args.corpus or ["warp", "newton"]:
            bench_corpus(name, repos, table, work, args.copies_for_baseline)
        if not args.skip_lsp:
            bench_editor(repos, work, editor_rows)
        if not args.skip_run:
            bench_runs(repos, table, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the end\n")
    print(table.text())
    for row in editor_rows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
