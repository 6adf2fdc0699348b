"""Options and helpers that ``check`` and ``apply`` share (ruff's names and meanings).

Only the standard library and light warpfix modules are imported here: building the parser
must stay fast (``warpfix --version``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from warpfix.config import ConfigError, Overrides, ProjectConfig

STDIN = "-"


def add_selection_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("rule selection")
    g.add_argument("--select", default="", metavar="IDS",
                   help="comma-separated rule IDs or prefixes (WF1,WF401); replaces the configured `select`")
    g.add_argument("--ignore", default="", metavar="IDS", help="comma-separated rule IDs or prefixes to skip")
    g.add_argument("--extend-select", default="", metavar="IDS", help="rules to add to the selection")
    g.add_argument("--extend-ignore", default="", metavar="IDS", help="rules to add to the ignored ones")
    g.add_argument("--fixable", default=None, metavar="IDS",
                   help="only these rules' fixes are applied (default: every rule with a fix)")
    g.add_argument("--unfixable", default="", metavar="IDS", help="rules whose fixes are never applied")


def add_config_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("configuration")
    g.add_argument("--config", metavar="FILE",
                   help="use this pyproject.toml (or a TOML file of [tool.warpfix] keys) for every file")
    g.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    g.add_argument("--warp-version", metavar="X.Y.Z",
                   help="assume this Warp version instead of the installed one (version-gated rules)")
    g.add_argument("--no-cache", action="store_true", help="do not read or write .warpfix_cache/")


def add_output_args(p: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--output-format", "--format", dest="format", choices=formats, default="text",
                   help="report format (default: text; --format is an alias)")
    g.add_argument("-o", "--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
    g.add_argument("--no-color", action="store_true", help="no ANSI colors (also: the NO_COLOR variable)")
    g.add_argument("-q", "--quiet", action="store_true", help="print the findings only, no summary")
    g.add_argument("-v", "--verbose", action="store_true",
                   help="say on stderr which configuration each file uses and how long it took")
    g.add_argument("--stdin-filename", metavar="PATH",
                   help="the path of the source read from stdin (`-`): configuration and imports are resolved "
                   "from it")


def add_debug_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the traceback of an internal error")


def split_ids(text: str | None) -> list[str]:
    return [t.strip().upper() for t in (text or "").split(",") if t.strip()]


def validate_ids(ids: list[str]) -> str | None:
    from warpfix.rules import all_rules

    known = [r.id for r in all_rules()]
    for i in ids:
        if not any(k.startswith(i) for k in known):
            return f"unknown rule or prefix {i!r} (see `warpfix rules`)"
    return None


def error(message: str) -> int:
    """Print a one-line usage or input error on stderr; the exit code 2."""
    print(f"warpfix: {message}", file=sys.stderr)
    return 2


def project_config(args: argparse.Namespace) -> ProjectConfig:
    """The run's configuration from ``--config``/``--isolated`` and the selection flags;
    :class:`ConfigError` (or ValueError for an unknown rule ID) when they are wrong."""
    lists = {k: split_ids(getattr(args, k)) for k in ("select", "ignore", "extend_select", "extend_ignore",
                                                       "unfixable")}
    fixable = split_ids(args.fixable) if args.fixable is not None else None
    problem = validate_ids([i for ids in lists.values() for i in ids] + (fixable or []))
    if problem:
        raise ConfigError(problem)
    overrides = Overrides(
        extend_select=tuple(lists["extend_select"]), extend_ignore=tuple(lists["extend_ignore"]),
        fixable=tuple(fixable) if fixable is not None else None, unfixable=tuple(lists["unfixable"]),
    )
    if args.config and not os.path.isfile(args.config):
        raise ConfigError(f"{args.config}: no such configuration file")
    return ProjectConfig(config_file=args.config, isolated=args.isolated, overrides=overrides)


def stdin_path(args: argparse.Namespace) -> str | None:
    """The path standing for stdin (``-`` among the paths), or None; ValueError when misused."""
    if STDIN not in args.paths:
        if args.stdin_filename:
            raise ValueError("--stdin-filename needs `-` as the path (the source is read from stdin)")
        return None
    if len(args.paths) > 1:
        raise ValueError("`-` (stdin) cannot be combined with other paths")
    return args.stdin_filename or "stdin.py"


def use_color(args: argparse.Namespace, stream: TextIO) -> bool:
    if args.no_color or os.environ.get("NO_COLOR") or args.output_file:
        return False
    return stream.isatty()


@contextmanager
def report_stream(args: argparse.Namespace) -> Iterator[TextIO]:
    """Where the report goes: ``-o FILE`` or stdout."""
    if not args.output_file:
        yield sys.stdout
        return
    with open(args.output_file, "w", encoding="utf-8") as fh:
        yield fh
