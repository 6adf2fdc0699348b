"""Command line: ``warpfix check|apply|verify|rules|lsp``. Each verb lives in ``warpfix/commands/<verb>.py``
and exposes ``add_parser(subparsers)`` and ``run(args) -> int``."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
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


if __name__ == "__main__":
    sys.exit(main())
