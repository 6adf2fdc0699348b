"""``warpfix lsp``: run the language server over stdio (for editors; see the README's Integrations section)."""

from __future__ import annotations

import argparse
import logging
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lsp", help="run the language server over stdin/stdout (needs pygls: warpfix[lsp])")
    p.add_argument("--log-file", metavar="PATH", help="write the server's debug log to PATH")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        from warpfix.lsp import main
    except ImportError as exc:
        print(
            f"warpfix: the language server needs pygls and lsprotocol ({exc}); "
            "install them with `pip install 'warpfix[lsp]'`",
            file=sys.stderr,
        )
        return 2
    if args.log_file:
        logging.basicConfig(
            filename=args.log_file, level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s"
        )
    main()
    return 0
