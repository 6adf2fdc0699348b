"""Reading and atomically rewriting source files, keeping what the user's editor chose.

Text is decoded as UTF-8 (a byte-order mark is remembered and written back) without
newline translation, so CRLF files stay CRLF: codemods keep each file's own newline.
A rewrite goes to a temporary file in the same folder, gets the original's permission
bits, is flushed to disk and then renamed over the original, so a reader (or a crash)
sees either the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass

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
        with open(path, "rb") as fh:
            data = fh.read()
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    bom = data.startswith(_BOM)
    try:
        text = data[len(_BOM) if bom else 0:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not valid UTF-8 (byte {exc.start})") from exc
    return SourceText(path, text, bom, mode)


def write_source(original: SourceText, text: str) -> None:
    """Replace ``original.path`` by ``text`` atomically, keeping its BOM and permission bits.

    Raises :class:`SourceError` when the file changed on disk since ``original`` was read.
    """
    path = os.path.realpath(original.path)  # through a symlink: the link stays a link
    try:
        current = read_source(path)
    except SourceError as exc:
        raise SourceError(f"{path}: changed on disk while fixing ({exc})") from exc
    if current.text != original.text:
        raise SourceError(f"{path}: changed on disk while fixing; not written")
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".warpfix-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(original.encode(text))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, original.mode)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise SourceError(f"{path}: cannot write ({exc.strerror or exc})") from exc
