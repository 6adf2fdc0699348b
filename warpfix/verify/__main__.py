"""``python -m warpfix.verify ...``: the same as ``warpfix verify ...``."""

import argparse
import sys

from warpfix.commands import verify

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m warpfix.verify")
    sub = parser.add_subparsers(dest="command", required=True)
    verify.add_parser(sub)
    sys.exit(verify.run(parser.parse_args(["verify", *sys.argv[1:]])))
