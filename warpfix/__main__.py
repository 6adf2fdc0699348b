"""``python -m warpfix``. ``-m`` puts the working folder first on ``sys.path``, so a ``math.py`` or
``types.py`` there (newton's own package folder has both) would shadow the standard library for
warpfix's imports; drop it before anything else is imported, as the ``warpfix`` script has it."""

import os
import sys

if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from warpfix.cli import entry  # noqa: E402

entry()
