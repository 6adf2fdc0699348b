"""Reading and atomically rewriting source files, keeping what the user's editor chose.

Text is decoded as UTF-8 (a byte-order mark is remembered and written back) without
newline translation, so CRLF files stay CRLF: codemods keep each file's own newline.
A rewrite goes to a temporary file in the same folder first (see :func:`write_source` for
when it is renamed over the original and when the original is rewritten in place), so
permissions, owner and hard links are kept and a failed write leaves the file as it was.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

from warpfix import notebook
from warpfix.discovery import read_bytes

_BOM = b"\xef\xbb\xbf"


class SourceError(Exception):
    """A file that cannot be read or decoded; the message is one line."""


@dataclass(frozen=True)
class SourceText:
    path: str
    text: str
    bom: bool  # the file starts with a UTF-8 byte-order mark
    mode: int  # permission bits

    def encode(self, text: str) -> bytes:
        return (_BOM if self.bom else b"") + text.encode("utf-8")


def read_source(path: str) -> SourceText:
    """Read a UTF-8 Python file; :class:`SourceError` when missing, unreadable or not UTF-8."""
    try:
        data = read_bytes(path)
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    bom = data.startswith(_BOM)
    try:
        text = data[len(_BOM) if bom else 0:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not valid UTF-8 (byte {exc.start})") from exc
    return SourceText(path, text, bom, mode)


def _refusal(path: str, st: os.stat_result) -> str | None:
    """Why ``path`` must not be rewritten (None: it may)."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file; not written"
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        return "read-only file; not written (make it writable to let warpfix fix it)"
    return None


def _in_place(st: os.stat_result) -> bool:
    """A rename would break the file's hard links or give it our owner: write through its inode."""
    return st.st_nlink > 1 or (hasattr(os, "geteuid") and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()))


def write_source(original: SourceText, text: str) -> None:
    """Replace ``original.path`` by ``text``, keeping its BOM, permission bits, owner and hard links.

    The new content is first written and flushed to a temporary file in the same folder. Then,
    for a file with one link that we own, the temporary file gets the original's permission bits
    and is renamed over it (atomic: a reader sees the old file or the new one). A file with hard
    links or another owner (fixing as root) is instead rewritten in place through its own inode
    once the temporary copy succeeded, so links, owner and mode stay. A writable file in a
    folder where no temporary file can be created is rewritten in place too. A read-only file
    is refused.

    Raises :class:`SourceError` (one line) when the file changed on disk since ``original`` was
    read, is read-only, or cannot be written.
    """
    path = os.path.realpath(original.path)  # through a symlink: the link stays a link
    try:
        current = read_source(path)
        st = os.stat(path)
    except (SourceError, OSError) as exc:
        raise SourceError(f"{path}: changed on disk while fixing ({exc})") from exc
    if current.text != original.text:
        raise SourceError(f"{path}: changed on disk while fixing; not written")
    refusal = _refusal(path, st)
    if refusal:
        raise SourceError(f"{original.path}: {refusal}")
    data = original.encode(text)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".warpfix-", suffix=".tmp", dir=folder)
    except OSError:
        tmp = None  # e.g. a read-only folder: the file itself is writable
    try:
        if tmp is not None:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            if not _in_place(st):
                os.chmod(tmp, original.mode)
                os.replace(tmp, path)
                tmp = None
                return
        with open(path, "r+b") as fh:
            fh.write(data)
            fh.truncate()
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise SourceError(f"{original.path}: cannot write ({exc.strerror or exc})") from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def write_texts(originals: Mapping[str, str], changed: Mapping[str, str]) -> list[str]:
    """Write the ``changed`` texts of files whose analysed text was ``originals``; one-line errors.

    A file whose analysed text differs from its original now (edited meanwhile) is left alone.
    A notebook's texts are its Python text (:mod:`warpfix.notebook`): only the changed cells'
    ``"source"`` values are replaced in its JSON.
    """
    errors: list[str] = []
    for path, new in changed.items():
        try:
            src = read_source(path)
            if notebook.is_notebook(path):
                nb = notebook.parse(src.text)
                if notebook.to_python(nb) != originals[path]:
                    raise SourceError(f"{path}: changed on disk while fixing; not written")
                write_source(src, notebook.splice(nb, new))
            else:
                if src.text != originals[path]:
                    raise SourceError(f"{path}: changed on disk while fixing; not written")
                write_source(src, new)
        except SourceError as exc:
            errors.append(str(exc))
        except notebook.NotebookError as exc:
            errors.append(f"{path}: {exc}; not written")
    return errors
