"""``warpfix apply [PATH...] [--diff] [--unsafe-fixes] [--check -- CMD...]``: fix what can be fixed.

Exit codes: 0 nothing to do, 1 files changed (or, with ``--diff``, would change),
2 usage or input error (nothing is written then).
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import sys
from collections.abc import Sequence

from warpfix.apply import ApplyResult, Edit, Selection, check_fixes, plan_fixes, write_changes
from warpfix.commands.check import add_selection_args, split_ids, validate_ids
from warpfix.config import ConfigError, load_config
from warpfix.engine import parse_version


class _ApplyParser(argparse.ArgumentParser):
    """Splits ``-- CMD...`` (the entry command of ``--check``) off before parsing the rest."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        args = list(sys.argv[1:] if args is None else args)
        command: list[str] = []
        if "--" in args:
            split = args.index("--")
            args, command = args[:split], args[split + 1:]
        namespace, extra = super().parse_known_args(args, namespace)
        namespace.entry_command = command
        return namespace, extra


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "apply",
        help="apply fixes (exit 0: nothing to do, 1: files changed, 2: usage/input error)",
        description="Apply the safe fixes of RULES.md. With --check -- CMD, prove each edit with finite "
        "differences of the program CMD runs, and keep only the edits that pass.",
    )
    p.__class__ = _ApplyParser
    p.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or folders (default: .)")
    add_selection_args(p)
    p.add_argument("--diff", action="store_true", help="print unified diffs and write nothing")
    p.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes marked unsafe")
    p.add_argument(
        "--check", action="store_true",
        help="prove each edit by FD verification of `-- CMD...` (default: [tool.warpfix] entry)",
    )
    p.add_argument(
        "--check-if-configured", action="store_true",
        help="--check with the [tool.warpfix] entry command when one is configured, else a static apply "
        "(the pre-commit hook)",
    )
    p.add_argument("--device", help="Warp device for --check (e.g. cuda:0)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="seconds per verifier run (--check)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write .warpfix_cache/")
    p.add_argument("--warp-version", help=argparse.SUPPRESS)
    p.set_defaults(run=run, entry_command=[])


def _error(message: str) -> int:
    print(f"warpfix: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    select, ignore = split_ids(args.select), split_ids(args.ignore)
    problem = validate_ids(select + ignore)
    if problem:
        return _error(problem)
    missing = [p for p in args.paths if not os.path.exists(p)]
    if missing:
        return _error(f"{missing[0]}: no such file or directory")
    try:
        config = load_config(args.paths[0])
    except ConfigError as exc:
        return _error(str(exc))
    if args.check_if_configured and config.entry:
        args.check = True
    if args.entry_command and not args.check:
        return _error("a command after `--` is only used with --check")
    selection = Selection(
        select=select, ignore=ignore, config=config, use_cache=not args.no_cache,
        warp_version=parse_version(args.warp_version) if args.warp_version else None,
    )
    if args.check:
        command = args.entry_command or list(config.entry)
        if not command:
            return _error("--check needs the program to run: `warpfix apply --check -- python train.py`")
        result = check_fixes(
            args.paths, command, root=".", selection=selection, unsafe=args.unsafe_fixes,
            device=args.device or config.device, timeout=args.timeout,
        )
    else:
        result = plan_fixes(args.paths, selection=selection, unsafe=args.unsafe_fixes)
    if result.errors:
        for line in result.errors:
            print(f"warpfix: {line}", file=sys.stderr)
        return 2

    if not args.diff:
        write_errors = write_changes(result)
        if write_errors:
            for line in write_errors:
                print(f"warpfix: {line}", file=sys.stderr)
            return 2

    if args.format == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    elif args.diff:
        sys.stdout.write(unified_diffs(result))
    else:
        render_text(result, checked=args.check, color=sys.stdout.isatty())
    return 1 if result.changed else 0


def unified_diffs(result: ApplyResult) -> str:
    out = []
    for path in sorted(result.changed):
        out.extend(
            difflib.unified_diff(
                result.originals[path].splitlines(keepends=True),
                result.changed[path].splitlines(keepends=True),
                fromfile=f"a/{path}",
                tofile=f"b/{path}",
            )
        )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def _fd(summary: dict | None) -> str:
    if summary is None:
        return ""
    err = summary.get("max_rel_err")
    return summary["verdict"] + (f" ({err:.2g})" if isinstance(err, float) else "")


def _status(edit: Edit) -> str:
    if edit.kept:
        return "[green]kept[/green]" if edit.fd_after is not None else "[green]fixed[/green]"
    return "[yellow]not fixed[/yellow]"


def render_text(result: ApplyResult, *, checked: bool, color: bool, file: io.TextIOBase | None = None) -> None:
    """A rich diff of every changed file, then a table of the edits."""
    from rich.console import Console
    from rich.markup import escape
    from rich.syntax import Syntax
    from rich.table import Table

    console = Console(file=file or sys.stdout, force_terminal=color, no_color=not color, width=110 if not color else None)
    diffs = unified_diffs(result)
    if diffs:
        console.print(Syntax(diffs, "diff", theme="ansi_dark", background_color="default"))
    # diagnostics without a fix are `warpfix check`'s business; here: what apply did or could not do
    shown = [e for e in result.edits if e.kept or not e.reason.startswith(("no automatic fix", "diagnostic only"))]
    if shown:
        table = Table(show_edge=False, header_style="bold")
        table.add_column("rule")
        table.add_column("place")
        if checked:
            table.add_column("FD before -> after")
        table.add_column("result")
        table.add_column("why", overflow="fold")
        for e in shown:
            row = [e.finding.rule, f"{e.finding.path}:{e.finding.line}"]
            if checked:
                row.append(f"{_fd(e.fd_before)} -> {_fd(e.fd_after)}" if e.fd_after else "")
            row += [_status(e), escape(e.reason)]
            table.add_row(*row)
        console.print(table)
    fixed = sum(e.kept for e in result.edits)
    files = len(result.changed)
    remain = len(result.remaining)
    console.print(
        f"{fixed} fix{'es' if fixed != 1 else ''} applied in {files} file{'s' if files != 1 else ''}; "
        f"{remain} finding{'s remain' if remain != 1 else ' remains'}" + (" (`warpfix check` lists them)" if remain else "")
    )
