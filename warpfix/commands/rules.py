"""``warpfix rules [ID]``: list the rules (the static ones, then those only ``warpfix verify``
reports), or print one rule's doc."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="list the rules or show one rule's documentation")
    p.add_argument("rule", nargs="?", metavar="ID", help="a rule ID (WF101) or name (copy-writeback)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from warpfix.rules import all_rules, rule_by_id
    from warpfix.runtime_rules import RUNTIME_RULES, runtime_rule

    if args.rule:
        rule = rule_by_id(args.rule) or runtime_rule(args.rule)
        if rule is None:
            print(f"warpfix: unknown rule {args.rule!r} (`warpfix rules` lists them)", file=sys.stderr)
            return 2
        sys.stdout.write(rule.render_doc())
        return 0
    for r in all_rules():
        print(f"{r.id}  {r.name:<28} {r.severity.value:<8} fix: {r.fix_safety.value}")
    for rt in RUNTIME_RULES:
        print(f"{rt.id}  {rt.name:<28} {rt.severity:<8} fix: none  (warpfix verify)")
    return 0
