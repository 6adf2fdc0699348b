import sys

from warpfix.cli import main

sys.exit(main())
