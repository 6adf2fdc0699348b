from warpfix.cli import entry

entry()
