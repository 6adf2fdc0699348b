"""Part of the verify probe (relative imports, warp and numpy only): which frames are the program's,
the call site of an operation, relative paths, findings at a site, and the program's own exceptions."""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Frames in these folders are never the program's: Warp itself, this probe, runpy.
SKIP_DIRS: tuple[str, ...] = ()
#: Installed libraries and the standard library: a call site there is a library line.
LIBRARY_DIRS: tuple[str, ...] = ()


def _skip_dirs() -> tuple[str, ...]:
    import warp  # noqa: PLC0415

    here = Path(__file__).resolve().parent
    return tuple(
        os.path.join(str(d), "")
        for d in (Path(warp.__file__).resolve().parent, here, Path(runpy.__file__).resolve().parent / "runpy.py")
    )


def _library_dirs() -> tuple[str, ...]:
    import site  # noqa: PLC0415
    import sysconfig  # noqa: PLC0415

    paths = sysconfig.get_paths()
    dirs = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # old virtualenvs ship a site module without these
        pass
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


_REAL: dict[str, str] = {}


def _real(path: str) -> str:
    out = _REAL.get(path)
    if out is None:
        out = _REAL[path] = os.path.realpath(path)
    return out


def _is_library(path: str) -> bool:
    return path.startswith(LIBRARY_DIRS) or "/site-packages/" in path or "/dist-packages/" in path



def locate_dirs() -> None:
    """Fill SKIP_DIRS and LIBRARY_DIRS (at bootstrap, once warp is importable)."""
    global SKIP_DIRS, LIBRARY_DIRS
    SKIP_DIRS = _skip_dirs()
    LIBRARY_DIRS = _library_dirs()


class _ProgramError(Exception):
    """An exception raised by the program's own call into Warp, carried through the probe's hooks."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _pointer(arg: Any) -> int | None:
    """The address a native routine's argument passes, if it is one (an int or a ctypes pointer)."""
    import ctypes  # noqa: PLC0415

    if isinstance(arg, int) and not isinstance(arg, bool):
        return arg
    if isinstance(arg, ctypes._Pointer | ctypes.c_void_p):
        return ctypes.cast(arg, ctypes.c_void_p).value
    if isinstance(arg, ctypes.c_uint64 | ctypes.c_int64 | ctypes.c_size_t):
        return arg.value
    return None


def _as_program(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its exceptions wrapped as the program's (see :meth:`Tracer.shield`)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _ProgramError:
            raise
        except Exception as exc:
            raise _ProgramError(exc) from exc

    return call

class ProgramSites:
    """Tracer's call sites: the program's frames, the line an operation comes from, the findings noted there."""

    def site(self) -> tuple[str, int]:
        """(path relative to cwd, line) of the innermost user frame: where the program called Warp
        (for a replayed graph: where the captured call was made)."""
        if self.forced_site is not None:
            return self.forced_site[0], self.forced_site[1]
        frame = self.user_frame()
        if frame is None:
            return "<unknown>", 0
        return self.relpath(frame.f_code.co_filename), frame.f_lineno

    def library_site(self) -> str | None:
        """``path:line`` of the innermost library frame that called Warp, when it is not the program's."""
        if self.forced_site is not None:
            return self.forced_site[2]
        frame = sys._getframe(1)
        while frame is not None:
            fn = frame.f_code.co_filename
            if not fn.startswith("<") and not _real(fn).startswith(SKIP_DIRS):
                if self.is_program(fn):
                    return None
                return f"{self.relpath(fn)}:{frame.f_lineno}"
            frame = frame.f_back
        return None

    def is_program(self, filename: str) -> bool:
        """True for the program's own files: outside Warp, this probe and installed libraries, or in
        the folder of the ``__main__`` file (an example run from inside a package)."""
        known = self.program_files.get(filename)
        if known is None:
            known = self.program_files[filename] = self._is_program(filename)
        return known

    def _is_program(self, filename: str) -> bool:
        real = _real(filename)
        if self.main_dir is None:
            main_file = getattr(sys.modules.get("__main__"), "__file__", None)
            if main_file:
                self.main_dir = os.path.join(os.path.dirname(_real(main_file)), "")
                self.program_files.clear()
        if self.main_dir is not None and real.startswith(self.main_dir) and not real.startswith(SKIP_DIRS[1:]):
            return True  # an example run from inside an installed package (warp/examples, newton/examples)
        if real.startswith(SKIP_DIRS):
            return False
        return not _is_library(real)

    def user_frame(self) -> Any:
        frame = sys._getframe(1)
        while frame is not None:
            fn = frame.f_code.co_filename
            if not fn.startswith("<") and self.is_program(fn):
                return frame
            frame = frame.f_back
        return None

    def relpath(self, path: str) -> str:
        out = self.relpaths.get(path)
        if out is None:
            out = self.relpaths[path] = self._relpath(path)
        return out

    def _relpath(self, path: str) -> str:
        ap = os.path.abspath(path)
        try:
            rel = os.path.relpath(ap, self.cwd)
        except ValueError:
            return ap
        return ap if rel.startswith("..") else rel

    def add_finding(
        self, rule: str, path: str, line: int, message: str, key: tuple, *, classified_as: str | None = None,
        library: str | None = None, **data: Any,
    ) -> None:
        """Record a finding once per ``key``; a repeat (the same launch, another element of the same
        array family, a later step of the loop) only counts."""
        known = self._finding_keys.get(key)
        if known is not None:
            known["data"]["count"] = known["data"].get("count", 1) + 1
            return
        finding: dict[str, Any] = {"rule": rule, "path": path, "line": line, "message": message, "data": data,
                                   "classified_as": classified_as}  # fmt: skip
        if classified_as == "WF103":
            finding["severity"] = "error"  # one object as input and output of a taped launch: never intended
        if library and library != f"{path}:{line}":
            lib_path, _, lib_line = library.rpartition(":")
            finding["related"] = [{"path": lib_path, "line": int(lib_line), "message": "the library line that called Warp"}]
        self._finding_keys[key] = finding
        self.findings.append(finding)
