"""``warpfix check [PATH...]``: report every rule of RULES.md found in a project.

Exit codes (ruff's): 0 no finding, 1 findings, 2 a usage or input error or an internal error,
whatever else was found. The report goes to stdout (or ``-o FILE``); input errors and other
diagnostics to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

from warpfix.commands._common import (
    add_config_args,
    add_debug_arg,
    add_output_args,
    add_selection_args,
    error,
    project_config,
    report_stream,
    split_ids,
    stdin_path,
    use_color,
)
from warpfix.config import ConfigError, ProjectConfig
from warpfix.report import FORMATS

WATCH_INTERVAL = 0.5  # seconds between two polls of the files' modification times


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="find gradient bugs (exit 0: none, 1: findings, 2: usage/input error)",
        description="Report the gradient bugs of RULES.md in Python files, folders and Jupyter notebooks. "
        "Exit 0: no finding; 1: findings; 2: a usage or input error (whatever else was found).",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .); `-` reads stdin")
    add_selection_args(p)
    add_config_args(p)
    add_output_args(p, FORMATS)
    g = p.add_argument_group("behaviour")
    g.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    g.add_argument("--statistics", action="store_true", help="print the number of findings per rule instead")
    g.add_argument("--add-noqa", action="store_true",
                   help="add `# warpfix: ignore[ID]` comments to every line with a finding, and exit 0")
    g.add_argument("--show-settings", action="store_true", help="print the settings of the first path and exit")
    g.add_argument("--show-files", action="store_true", help="print the files that would be checked and exit")
    g.add_argument("-w", "--watch", action="store_true", help="check again whenever a checked file changes")
    # default 1: on 2 cores two workers read a cold newton or warp tree in 10-15% less wall time for
    # 9-13% more CPU (bench/check_speed.py, after the file summaries), and a warm check forks nothing
    g.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="read uncached files and run the project-level rule passes in N processes (default 1: no workers; 0: one per core)")
    add_debug_arg(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        stdin = stdin_path(args)
        config = project_config(args)
    except (ValueError, ConfigError) as exc:
        return error(str(exc))
    paths = args.paths or ["."]
    try:
        if args.show_settings:
            return show_settings(args, config, stdin or paths[0])
        if args.show_files:
            return show_files(config, paths)
        if args.watch:
            if stdin:
                return error("--watch cannot read stdin")
            return watch(args, config, paths)
        return check_once(args, config, paths, stdin)
    except ConfigError as exc:
        return error(str(exc))


def run_check(args: argparse.Namespace, config: ProjectConfig, paths: list[str], stdin: str | None):
    """The CheckResult of the paths (or of stdin, standing for the file ``stdin``)."""
    from warpfix.discovery import decode
    from warpfix.engine import (
        CheckResult,
        InputError,
        check_paths,
        check_sources,
        installed_warp_version,
        parse_version,
    )

    version = parse_version(args.warp_version) if args.warp_version else installed_warp_version()
    select, ignore = split_ids(args.select), split_ids(args.ignore)
    if stdin is None:
        return check_paths(
            paths, select=select, ignore=ignore, config=config, jobs=max(0, args.jobs),
            use_cache=not args.no_cache, warp_version=version,
        ), version
    text, problem = decode(stdin, sys.stdin.buffer.read())
    if text is None:
        return CheckResult(errors=[InputError(stdin, problem or "cannot read")], files_checked=1), version
    config.for_path(stdin)
    result = check_sources({stdin: text}, select=select, ignore=ignore, config=config, warp_version=version,
                           follow_imports=True)
    result.sources.setdefault(stdin, text)
    return result, version


def check_once(args: argparse.Namespace, config: ProjectConfig, paths: list[str], stdin: str | None) -> int:
    start = time.perf_counter()
    result, version = run_check(args, config, paths, stdin)
    if args.verbose:
        for path in sorted(result.sources):
            print(f"warpfix: {path}: configuration {config.for_path(path).path or '(defaults)'}", file=sys.stderr)
        print(f"warpfix: {result.files_checked} files checked in {time.perf_counter() - start:.2f} s"
              + (" (cached)" if result.cached else ""), file=sys.stderr)
    if args.add_noqa:
        from warpfix.noqa import add_noqa

        added, problems = add_noqa(result.findings, result.sources)
        for line in problems:
            print(f"warpfix: {line}", file=sys.stderr)
        print(f"Added {added} suppression comment{'s' * (added != 1)}.", file=sys.stderr)
        return 2 if problems or result.errors else 0
    with report_stream(args) as out:
        if args.statistics:
            text = statistics(result.findings, args.format)
        elif args.format in ("text", "full", "concise"):
            text = _text(args, result, use_color(args, out))
        else:
            from warpfix.report import render

            text = render(args.format, result, warp_version=".".join(map(str, version)), sources=result.sources)
        if text:
            out.write(text if text.endswith("\n") else text + "\n")
    for e in sorted(result.errors, key=lambda e: e.path):
        print(f"error: {e.path}: {e.message}", file=sys.stderr)
    if result.errors:
        return 2
    return 1 if result.findings and not args.exit_zero else 0


def _text(args: argparse.Namespace, result, color: bool) -> str:
    from warpfix.report.text import render_text

    return render_text(
        result.findings, errors=result.errors, sources=result.sources, files_checked=result.files_checked,
        color=color, skipped=result.skipped, quiet=args.quiet, show_errors=False, concise=args.format == "concise",
    )


def statistics(findings: list, fmt: str) -> str:
    """Findings per rule, most frequent first (ruff's ``--statistics``)."""
    from warpfix.report.base import fix_marker

    counts = Counter(f.rule for f in findings)
    example = {f.rule: f for f in findings}
    rows = sorted(counts, key=lambda r: (-counts[r], r))
    if fmt == "json":
        return json.dumps([{"code": r, "name": example[r].name, "count": counts[r],
                            "fixable": bool(fix_marker(example[r]))} for r in rows], indent=2)
    width = len(str(max(counts.values(), default=0)))
    return "".join(f"{counts[r]:>{width}}\t{r}\t{fix_marker(example[r]) or '   '} {example[r].name}\n" for r in rows)


def show_settings(args: argparse.Namespace, config: ProjectConfig, path: str) -> int:
    settings = config.for_path(path).settings()
    settings.update(cli_select=split_ids(args.select), cli_ignore=split_ids(args.ignore),
                    warp_version=args.warp_version)
    print(f"Settings for {path}:")
    print(json.dumps(settings, indent=2))
    return 0


def show_files(config: ProjectConfig, paths: list[str]) -> int:
    from warpfix.discovery import discover

    found = discover(paths, config)
    for p in found.files:
        print(p)
    for e in found.errors:
        print(f"error: {e.path}: {e.message}", file=sys.stderr)
    return 2 if found.errors else 0


def _snapshot(config: ProjectConfig, paths: list[str]) -> dict[str, tuple[int, int]]:
    from warpfix.discovery import discover

    out = {}
    for p in [*discover(paths, config).files, *(c.path for c in config.configs() if c.path)]:
        try:
            st = os.stat(p)
        except OSError:
            continue
        out[p] = (st.st_mtime_ns, st.st_size)
    return out


def watch(args: argparse.Namespace, config: ProjectConfig, paths: list[str]) -> int:
    """Check, then again whenever a checked file or a configuration file changes (polling)."""
    try:
        while True:
            before = _snapshot(config, paths)
            check_once(args, config, paths, None)
            sys.stdout.flush()
            print("warpfix: watching for changes (Ctrl-C ends)", file=sys.stderr, flush=True)
            while _snapshot(config, paths) == before:
                time.sleep(WATCH_INTERVAL)
            print(f"warpfix: change detected at {time.strftime('%H:%M:%S')}; checking again", file=sys.stderr)
            config = ProjectConfig(config_file=args.config, isolated=args.isolated, overrides=config.overrides)
    except KeyboardInterrupt:
        return 0
