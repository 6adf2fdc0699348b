"""Running user programs for `verify` and `apply --check`: process groups and scratch copies.

* :func:`run_group` runs a command in its own process group (a new session) and ends the whole
  group when the program exits, when the timeout passes and on Ctrl-C: background children
  never outlive the run.
* :func:`scratch_copy` builds a trial copy of a project: the directory tree is recreated, source
  and small files are copied, everything else (data, checkpoints) is symbolic-linked, so a large
  data folder costs nothing.
* :func:`map_command` points the command's absolute and parent-relative paths into the project
  at the scratch copy, or refuses paths it cannot map with a one-line reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

#: Folders a scratch copy leaves out (environments, caches, version control).
SKIP_DIRS = frozenset({".git", ".hg", ".venv", "venv", "__pycache__", ".warpfix_cache", ".warp-cache", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache", "node_modules"})  # fmt: skip
#: Files with these suffixes are always copied (the program's source and configuration).
SOURCE_SUFFIXES = frozenset({".py", ".pyi", ".pyx", ".pth", ".toml", ".cfg", ".ini", ".txt", ".json", ".yaml",
                             ".yml", ".md", ".rst"})  # fmt: skip
#: Other files up to this size are copied; larger ones are linked.
COPY_LIMIT = 1 << 20


@dataclass
class Completed:
    """How a :func:`run_group` run ended."""

    returncode: int
    timed_out: bool = False


def _end_group(pgid: int) -> None:
    """SIGTERM then SIGKILL every process left in the group ``pgid``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if sig == signal.SIGTERM:
            for _ in range(20):  # up to 0.2 s for a clean exit
                try:
                    os.killpg(pgid, 0)
                except (ProcessLookupError, PermissionError):
                    return
                time.sleep(0.01)


def run_group(
    cmd: Sequence[str], *, cwd: str, env: dict[str, str] | None, timeout: float, output: IO[bytes]
) -> Completed:
    """Run ``cmd`` in a new process group; stdout and stderr go to ``output``.

    The group is ended (SIGTERM, then SIGKILL) when the program's main process exits, at the
    timeout, and when this process is interrupted (KeyboardInterrupt is re-raised after the
    group is gone). Raises OSError when the command cannot be started.
    """
    proc = subprocess.Popen(
        list(cmd), cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_group(proc.pid)
            proc.wait()
            return Completed(returncode=-signal.SIGKILL, timed_out=True)
    except BaseException:  # Ctrl-C, SIGTERM turned into an exception, anything: leave nothing running
        _end_group(proc.pid)
        proc.wait()
        raise
    _end_group(proc.pid)  # background children of a program that has exited
    return Completed(returncode=code)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt while the block runs (so a killed warpfix cleans up too)."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _is_source(name: str, path: str) -> bool:
    if os.path.splitext(name)[1].lower() in SOURCE_SUFFIXES:
        return True
    try:
        return os.path.getsize(path) <= COPY_LIMIT
    except OSError:
        return False


def scratch_copy(root: str, dest: str) -> None:
    """Recreate ``root`` under ``dest``: folders are made, source and small files copied, the rest linked.

    Symbolic links inside the project are kept as links; folders in :data:`SKIP_DIRS` are left out.
    """
    root = os.path.abspath(root)
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        rel = os.path.relpath(here, root)
        target_dir = os.path.normpath(os.path.join(dest, rel))
        os.makedirs(target_dir, exist_ok=True)
        for d in list(dirs):
            src = os.path.join(here, d)
            if os.path.islink(src):  # a linked folder stays a link (os.walk does not follow it)
                os.symlink(os.readlink(src), os.path.join(target_dir, d))
                dirs.remove(d)
        for name in files:
            if name.endswith(".pyc"):
                continue
            src = os.path.join(here, name)
            dst = os.path.join(target_dir, name)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            elif _is_source(name, src):
                shutil.copy2(src, dst)
            else:
                os.symlink(src, dst)


def map_command(cmd: Sequence[str], root: str, scratch: str) -> list[str]:
    """The command as it must run in ``scratch`` (a copy of ``root``; the original ran in ``root``).

    An argument naming an existing path inside the project is pointed at the copy (absolute
    paths, ``../`` paths); one inside a folder the copy leaves out (a ``.venv``) keeps the
    original, made absolute. A Python file or a folder outside the project cannot be mapped:
    ValueError with a one-line reason.
    """
    root = os.path.abspath(root)
    out: list[str] = []
    for arg in cmd:
        if not arg or arg.startswith("-"):
            out.append(arg)
            continue
        original = os.path.normpath(arg if os.path.isabs(arg) else os.path.join(root, arg))
        if not os.path.lexists(original):
            out.append(arg)
            continue
        rel = os.path.relpath(original, root)
        if rel == "." or not rel.startswith(".."):
            copied = os.path.normpath(os.path.join(scratch, rel))
            if not os.path.lexists(copied):
                out.append(original)
            elif os.path.isabs(arg) or os.path.normpath(arg).startswith(".."):
                out.append(copied)
            else:
                out.append(arg)
            continue
        if arg.endswith(".py") or (os.path.isdir(original) and not os.path.isabs(arg)):
            raise ValueError(
                f"`{arg}` lies outside the project folder {root} that apply --check copies for each trial: "
                "run warpfix from a folder that contains it"
            )
        out.append(original)
    return out


def scratch_run(
    root: str, files: dict[str, str], cmd: Sequence[str], run: Callable[[list[str], str], Any]
) -> Any:
    """Copy ``root`` to a temporary folder, write ``files`` (absolute path -> text) there and call
    ``run(mapped_cmd, scratch_folder)``. Raises ValueError when the command cannot be mapped."""
    root = os.path.abspath(root)
    with tempfile.TemporaryDirectory(prefix="warpfix-check-") as tmp:
        scratch = os.path.join(tmp, os.path.basename(root) or "project")
        scratch_copy(root, scratch)
        mapped = map_command(cmd, root, scratch)
        for path, text in files.items():
            target = os.path.join(scratch, os.path.relpath(path, root))
            if os.path.islink(target):
                os.unlink(target)
            with open(target, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
        return run(mapped, scratch)
