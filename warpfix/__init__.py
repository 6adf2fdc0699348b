"""warpfix: a linter and auto-fixer for gradient bugs in NVIDIA Warp programs."""

__version__ = "0.1.0"
