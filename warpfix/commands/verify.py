"""``warpfix verify [--device D] [--format text|json] [--timeout S] [--fd-budget S] -- CMD...``: FD-check the gradients
of a training program's first iteration, without a harness (see warpfix/verify/)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from warpfix.config import ConfigError, load_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help="compare the gradients of a program's first iteration with finite differences "
        "(exit 0: no failure, 1: a gradient fails, 2: could not verify)",
        description="Run CMD (e.g. `python train.py --small`) under a probe that traces its first training "
        "iteration and checks every tape.backward(loss) against finite differences.",
    )
    p.add_argument("--device", default=None, help="Warp device (default: [tool.warpfix] device, else Warp's default)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="kill the program after S seconds")
    p.add_argument(
        "--fd-budget", type=float, default=None, metavar="S",
        help="seconds finite differences may take (default: 15), or twice the program's own run time when "
        "that is more",
    )  # fmt: skip
    p.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD",
        help="the program to run (default: [tool.warpfix] entry, run from its pyproject.toml folder)",
    )  # fmt: skip
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from warpfix.verify import run_verify  # imported when used: `warpfix --version` stays fast
    from warpfix.verify.render import render_report

    cmd = list(args.cmd)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    try:
        config = load_config(os.getcwd())
    except ConfigError as exc:
        print(f"warpfix verify: {exc}", file=sys.stderr)
        return 2
    cwd = os.getcwd()
    if not cmd and config.entry and config.path:
        cmd, cwd = config.entry, os.path.dirname(config.path)
    try:
        report = run_verify(cmd, cwd=cwd, device=args.device or config.device, timeout=args.timeout,
                            fd_floor=args.fd_budget)
    except KeyboardInterrupt:
        print("warpfix verify: interrupted; the program and its children were stopped", file=sys.stderr)
        return 130
    if args.format == "json":
        sys.stdout.write(json.dumps(report.to_json(), indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(render_report(report, color=sys.stdout.isatty()))
    return report.exit_code
