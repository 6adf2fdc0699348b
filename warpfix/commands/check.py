"""``warpfix check PATH...``: report every rule of RULES.md found in a project."""

from __future__ import annotations

import argparse
import os
import sys

from warpfix.config import ConfigError, load_config
from warpfix.engine import check_paths, installed_warp_version, parse_version
from warpfix.report import FORMATS, render
from warpfix.rules import all_rules


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="find gradient bugs (exit 0: none, 1: findings, 2: usage/input error)")
    p.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or folders (default: .)")
    add_selection_args(p)
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    p.add_argument("--jobs", "-j", type=int, default=0, metavar="N",
                   help="run the rules in N processes (default 0: one per core; 1: no workers)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write .warpfix_cache/")
    p.add_argument("--warp-version", help=argparse.SUPPRESS)  # assume another Warp version (tests)
    p.set_defaults(run=run)


def add_selection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--select", default="", metavar="IDS", help="comma-separated rule IDs or prefixes (WF1,WF401)")
    p.add_argument("--ignore", default="", metavar="IDS", help="comma-separated rule IDs or prefixes to skip")


def split_ids(text: str) -> list[str]:
    return [t.strip().upper() for t in text.split(",") if t.strip()]


def validate_ids(ids: list[str]) -> str | None:
    known = [r.id for r in all_rules()]
    for i in ids:
        if not any(k.startswith(i) for k in known):
            return f"unknown rule or prefix {i!r} (see `warpfix rules`)"
    return None


def run(args: argparse.Namespace) -> int:
    select, ignore = split_ids(args.select), split_ids(args.ignore)
    problem = validate_ids(select + ignore)
    if problem:
        print(f"warpfix: {problem}", file=sys.stderr)
        return 2
    missing = [p for p in args.paths if not os.path.exists(p)]
    try:
        config = load_config(args.paths[0] if args.paths else ".")
    except ConfigError as exc:
        print(f"warpfix: {exc}", file=sys.stderr)
        return 2
    version = parse_version(args.warp_version) if args.warp_version else installed_warp_version()
    result = check_paths(
        args.paths, select=select, ignore=ignore, config=config, jobs=max(0, args.jobs),
        use_cache=not args.no_cache, warp_version=version,
    )
    out = render(
        args.format, result, warp_version=".".join(map(str, version)), sources=result.sources,
        color=args.format == "text" and sys.stdout.isatty(),
    )
    if out:
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    if args.format in ("json", "sarif"):
        for e in result.errors:
            print(f"warpfix: {e.path}: {e.message}", file=sys.stderr)
    if missing:
        return 2
    if result.findings:
        return 1
    return 2 if result.errors else 0
