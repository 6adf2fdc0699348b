"""Command line: ``warpfix check|apply|verify|rules|lsp``. Each verb lives in ``warpfix/commands/<verb>.py``
and exposes ``add_parser(subparsers)`` and ``run(args) -> int``.

Command modules import only the standard library and light warpfix modules at the top (the
analysis, libcst, rich, the verifier and pygls are imported by ``run`` when used), so that
``warpfix --version`` and the parser are fast. An internal error exits 2 with one line and a
hint; ``--debug`` shows its traceback.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import pkgutil
import sys
import traceback
from collections.abc import Sequence

from warpfix import __version__

VERB_ORDER = ("check", "apply", "verify", "rules", "lsp")


def _command_modules() -> list:
    import warpfix.commands as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    names.sort(key=lambda n: (VERB_ORDER.index(n) if n in VERB_ORDER else len(VERB_ORDER), n))
    return [importlib.import_module(f"warpfix.commands.{n}") for n in names]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="warpfix",
        description="Find, fix and prove gradient bugs in NVIDIA Warp differentiable programs.",
    )
    parser.add_argument("--version", action="version", version=f"warpfix {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("warpfix: interrupted", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one line and exit 2, not a traceback
        if getattr(args, "debug", False):
            raise
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
        print(
            f"warpfix: internal error: {type(exc).__name__}: {exc}{where}; run again with --debug for the "
            "traceback, and please report it",
            file=sys.stderr,
        )
        return 2


def entry() -> None:
    """The ``warpfix`` program: :func:`main`, then exit without tearing the interpreter down. A check
    leaves millions of AST nodes and model objects alive; freeing them one by one and the last full
    collection at shut-down cost a sixth of a whole check's CPU on warp's sources, for nothing. The
    exit handlers still run and the standard streams are flushed first (an unwritable stdout exits
    120, as Python's own shut-down does)."""
    code = main()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        code = 120
    os._exit(code)


if __name__ == "__main__":
    entry()
