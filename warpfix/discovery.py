"""Which files a run checks, and reading them.

- Files given on the command line are checked as given; folders are walked, skipping hidden
  folders, ``__pycache__``, ``node_modules``, ``build``, ``dist``, ``site-packages`` and
  virtualenvs (folders holding a ``pyvenv.cfg``; a folder merely *named* ``env`` is checked).
- ``exclude`` of each file's configuration applies to given and walked paths alike (so a
  pre-commit hook that names excluded files skips them), matched relative to the folder of
  that configuration.
- Inside a git repository, walked files that git ignores (``.gitignore``, ``.git/info/exclude``,
  the global excludes file) are skipped, asking ``git check-ignore``; without git, nothing is
  ignored on that account. A file or folder named on the command line is checked even when git
  ignores it (``check .venv/lib/python3.11/site-packages/newton`` checks newton).
- Only regular files are read: a FIFO or device named ``x.py`` in a folder is skipped, given
  explicitly it is an error; nothing ever blocks on it.
- Python files (``.py``) and Jupyter notebooks (``.ipynb``, whose code cells become one Python
  text, see :mod:`warpfix.notebook`).

Skipped files are counted by reason in :attr:`Discovery.skipped` for the summary.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from warpfix import notebook

SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist", "site-packages"}
SUFFIXES = (".py", notebook.SUFFIX)


@dataclass(frozen=True)
class InputError:
    path: str
    message: str


class Excluding(Protocol):
    def excludes(self, path: str) -> bool: ...


@dataclass
class Discovery:
    files: list[str] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> count

    def __iter__(self) -> Iterator:  # ``files, errors = discover(...)``
        return iter((self.files, self.errors))


def is_virtualenv(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "pyvenv.cfg"))


def discover(paths: Sequence[str], config: Excluding | None = None) -> Discovery:
    """The files under ``paths`` that a run checks (see the module docstring)."""
    out = Discovery()
    seen: set[str] = set()
    walked: list[tuple[str, str]] = []  # (the folder given, a file found in it)

    def excluded(p: str) -> bool:
        return config is not None and config.excludes(p)

    def add(p: str) -> None:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            out.files.append(p)

    for given in paths:
        if os.path.isdir(given):
            if excluded(given):
                out.skipped["excluded"] += 1
                continue
            for root, dirs, names in os.walk(given):
                kept = []
                for d in sorted(dirs):
                    full = os.path.join(root, d)
                    if d.startswith(".") or d in SKIP_DIRS:
                        continue
                    if is_virtualenv(full):
                        out.skipped["virtualenv"] += 1
                    elif excluded(full):
                        out.skipped["excluded"] += 1
                    else:
                        kept.append(d)
                dirs[:] = kept
                for n in sorted(names):
                    if not n.endswith(SUFFIXES):
                        continue
                    p = os.path.normpath(os.path.join(root, n))
                    if excluded(p):
                        out.skipped["excluded"] += 1
                        continue
                    try:
                        regular = stat.S_ISREG(os.stat(p).st_mode)
                    except OSError:
                        regular = True  # a broken or looping link: reading it reports why
                    if not regular:
                        out.skipped["not a regular file"] += 1
                        continue
                    walked.append((given, p))
        elif os.path.lexists(given):
            if excluded(given):
                out.skipped["excluded"] += 1
            else:
                add(given)
        else:
            out.errors.append(InputError(given, "no such file or directory"))
    # a folder named on the command line is checked whole even when git ignores it (like a file)
    ignored = git_ignored(sorted({g for g, _ in walked} | {p for _, p in walked}))
    for given, p in walked:
        if p in ignored and given not in ignored:
            out.skipped["ignored by git"] += 1
        else:
            add(p)
    return out


def git_ignored(paths: Sequence[str]) -> set[str]:
    """The subset of ``paths`` that git ignores (empty without git or outside a repository)."""
    git = shutil.which("git")
    if not git or not paths:
        return set()
    by_repo: dict[str, list[str]] = {}
    for p in paths:
        top = _git_toplevel(os.path.dirname(os.path.abspath(p)))
        if top is not None:
            by_repo.setdefault(top, []).append(p)
    out: set[str] = set()
    for top, members in by_repo.items():
        absolute = {os.path.abspath(p): p for p in members}
        try:
            proc = subprocess.run(
                [git, "-C", top, "check-ignore", "--stdin", "-z"], input="\0".join(absolute).encode(),
                capture_output=True, timeout=60, check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode not in (0, 1):
            continue
        for name in proc.stdout.decode(errors="surrogateescape").split("\0"):
            if name in absolute:
                out.add(absolute[name])
    return out


_TOPLEVEL: dict[str, str | None] = {}


def _git_toplevel(folder: str) -> str | None:
    """The working tree holding ``folder`` (a parent with ``.git``), found without running git."""
    if folder in _TOPLEVEL:
        return _TOPLEVEL[folder]
    parent = os.path.dirname(folder)
    if os.path.exists(os.path.join(folder, ".git")):
        top: str | None = folder
    elif parent == folder:
        top = None
    else:
        top = _git_toplevel(parent)
    _TOPLEVEL[folder] = top
    return top


def read_bytes(path: str) -> bytes:
    """The content of a regular file; :class:`OSError` otherwise. Never blocks on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def decode(path: str, data: bytes) -> tuple[str | None, str | None]:
    """(text to analyse, None) or (None, one-line error); notebooks become their Python text."""
    if b"\x00" in data:
        return None, "binary file (contains NUL bytes), skipped"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 (byte {exc.start}), skipped"
    if notebook.is_notebook(path):
        try:
            return notebook.to_python(notebook.parse(text)), None
        except notebook.NotebookError as exc:
            return None, str(exc)
    return text, None


def read_source(path: str) -> tuple[str | None, str | None]:
    """(text, None) or (None, one-line error)."""
    try:
        data = read_bytes(path)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    return decode(path, data)
