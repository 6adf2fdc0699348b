"""``warpfix rules [ID]``: list the rules, or print one rule's doc."""

from __future__ import annotations

import argparse
import sys

from warpfix.rules import all_rules, rule_by_id


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="list the rules or show one rule's documentation")
    p.add_argument("rule", nargs="?", metavar="ID", help="a rule ID (WF101) or name (copy-writeback)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.rule:
        rule = rule_by_id(args.rule)
        if rule is None:
            print(f"warpfix: unknown rule {args.rule!r}", file=sys.stderr)
            return 2
        sys.stdout.write(rule.render_doc())
        return 0
    for r in all_rules():
        print(f"{r.id}  {r.name:<28} {r.severity.value:<8} fix: {r.fix_safety.value}")
    return 0
