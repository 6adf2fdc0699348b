"""``warpfix apply [PATH...] [--diff] [--unsafe-fixes] [--check -- CMD...]``: fix what can be fixed.

Exit codes: 0 nothing to do and no error-level finding remains; 1 files changed (with ``--diff``:
would change) or an error-level finding remains (so the pre-commit hook fails until it is
resolved); 2 a usage or input error (the files that could be read are still fixed; the others
are named on stderr). ``-`` reads the source from stdin and prints the fixed source.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

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
from warpfix.config import ConfigError

if TYPE_CHECKING:
    from warpfix.apply import ApplyResult, Edit


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
        help="apply fixes (exit 0: nothing to do, 1: files changed or errors remain, 2: usage/input error)",
        description="Apply the safe fixes of RULES.md. With --check -- CMD, prove each edit with finite "
        "differences of the program CMD runs, and keep only the edits that pass.",
    )
    p.__class__ = _ApplyParser
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .); `-` reads stdin")
    add_selection_args(p)
    add_config_args(p)
    add_output_args(p, ("text", "json"))
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
    add_debug_arg(p)
    p.set_defaults(run=run, entry_command=[])


def run(args: argparse.Namespace) -> int:
    from warpfix import apply as fixing
    from warpfix.discovery import decode
    from warpfix.engine import parse_version

    try:
        stdin = stdin_path(args)
        config = project_config(args)
        paths = args.paths or ["."]
        missing = [p for p in paths if p != "-" and not os.path.lexists(p)]
        if missing:
            return error(f"{missing[0]}: no such file or directory")
        local = config.for_path(stdin or paths[0])
    except (ValueError, ConfigError) as exc:
        return error(str(exc))
    if args.check_if_configured and local.entry and not stdin:
        args.check = True
    if args.entry_command and not args.check:
        return error("a command after `--` is only used with --check")
    selection = fixing.Selection(
        select=split_ids(args.select), ignore=split_ids(args.ignore), config=config, use_cache=not args.no_cache,
        warp_version=parse_version(args.warp_version) if args.warp_version else None,
    )
    try:
        if args.check:
            if stdin:
                return error("--check cannot read stdin")
            command = args.entry_command or list(local.entry)
            if not command:
                return error("--check needs the program to run: `warpfix apply --check -- python train.py`")
            result = fixing.check_fixes(
                paths, command, root=".", selection=selection, unsafe=args.unsafe_fixes,
                device=args.device or local.device, timeout=args.timeout,
            )
        elif stdin:
            data = sys.stdin.buffer.read()
            text, problem = decode(stdin, data)
            if text is None:
                sys.stdout.buffer.write(data)
                return error(f"{stdin}: {problem}")
            raw = data.decode("utf-8-sig")
            result = fixing.plan_fixes([], selection=selection, unsafe=args.unsafe_fixes, sources={stdin: text})
        else:
            result = fixing.plan_fixes(paths, selection=selection, unsafe=args.unsafe_fixes)
    except ConfigError as exc:
        return error(str(exc))
    for line in result.errors:
        print(f"error: {line}", file=sys.stderr)
    if stdin:
        return _print_fixed(args, result, stdin, raw)

    if not args.diff:
        write_errors = fixing.write_changes(result)
        for line in write_errors:
            print(f"error: {line}", file=sys.stderr)
        result.errors.extend(write_errors)
        if write_errors and args.format != "json":
            return 2

    with report_stream(args) as out:
        if args.format == "json":
            out.write(json.dumps(result.to_json(), indent=2, allow_nan=False) + "\n")
        elif args.diff:
            out.write(unified_diffs(result))
            if not args.quiet:
                sys.stderr.write(diff_summary(result))
        elif not args.quiet or result.changed:
            render_text(result, checked=args.check, color=use_color(args, out), file=out)
    if result.errors:
        return 2
    return 1 if result.changed or _errors_remain(result) else 0


def diff_summary(result: ApplyResult) -> str:
    """What ``--diff`` would do, for stderr (stdout holds the diffs alone, as in ruff): each edit that
    would not be made, with why, then the count."""
    from warpfix.report.cells import localize

    lines = []
    for e in _shown(result):
        if not e.kept:
            where, cell = localize(e.finding, result.originals)
            place = f"{where.path}:cell {cell}:{where.line}" if cell is not None else f"{where.path}:{where.line}"
            lines.append(f"{place}: {e.finding.rule} not fixed: {e.reason}\n")
    fixed, files = sum(e.kept for e in result.edits), len(result.changed)
    lines.append(f"Would apply {fixed} fix{'es' if fixed != 1 else ''} in {files} file{'s' if files != 1 else ''}\n")
    return "".join(lines)


def _shown(result: ApplyResult) -> list[Edit]:
    """The edits apply reports: those made, and those it could not make (diagnostics without any fix
    are `warpfix check`'s business)."""
    return [e for e in result.edits if e.kept or not e.reason.startswith(("no automatic fix", "diagnostic only"))]


def _errors_remain(result: ApplyResult) -> bool:
    return any(f.severity.value == "error" for f in result.remaining)


def _print_fixed(args: argparse.Namespace, result: ApplyResult, path: str, raw: str) -> int:
    """stdin: the fixed source on stdout (a notebook: its JSON, only the fixed cells changed; the
    source as it was when it cannot be fixed), or its diff with ``--diff``."""
    from warpfix import notebook

    if args.diff:
        sys.stdout.write(unified_diffs(result))
    elif path not in result.changed:
        sys.stdout.write(raw)
    elif notebook.is_notebook(path):
        sys.stdout.write(notebook.splice(notebook.parse(raw), result.changed[path]))
    else:
        sys.stdout.write(result.changed[path])
    if result.errors:
        return 2
    return 1 if result.changed or _errors_remain(result) else 0


def unified_diffs(result: ApplyResult) -> str:
    """A unified diff per changed file (a notebook: per changed cell, ``a/nb.ipynb:cell 3``)."""
    from warpfix.notebook import is_notebook
    from warpfix.report.cells import cell_sources

    out = []
    for path in sorted(result.changed):
        old, new = result.originals[path], result.changed[path]
        pairs = [(path, old, new)]
        if is_notebook(path):
            before, after = cell_sources(path, old), cell_sources(path, new)
            pairs = [(label, before[label], after.get(label, "")) for label in before if before[label] != after.get(label)]
        for label, a, b in pairs:
            out.extend(difflib.unified_diff(
                a.splitlines(keepends=True), b.splitlines(keepends=True), fromfile=f"a/{label}", tofile=f"b/{label}",
            ))
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

    from warpfix.report.cells import localize

    console = Console(file=file or sys.stdout, force_terminal=color, no_color=not color, width=110 if not color else None)
    diffs = unified_diffs(result)
    if diffs:
        console.print(Syntax(diffs, "diff", theme="ansi_dark", background_color="default"))
    shown = _shown(result)
    if shown:
        table = Table(show_edge=False, header_style="bold")
        table.add_column("rule")
        table.add_column("place")
        if checked:
            table.add_column("FD before -> after")
        table.add_column("result")
        table.add_column("why", overflow="fold")
        for e in shown:
            shown, cell = localize(e.finding, result.originals)
            where = f"{shown.path}:cell {cell}:{shown.line}" if cell is not None else f"{shown.path}:{shown.line}"
            row = [e.finding.rule, where]
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
