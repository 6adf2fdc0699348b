"""Each file's summary and kernel facts on disk, keyed by its path and contents (and warpfix's own
code): a check of a large project re-reads only the files that changed since the last check and
takes the others' from here, released (:meth:`warpfix.model.source.SourceFile.scan`). What depends
on a changed file (the roots that reach it, the rules' findings) is computed again from the
summaries, which compose across files (:mod:`warpfix.model.host.linker`).

The cache lives in the user's cache folder (``$WARPFIX_CACHE_DIR/files``, else
``$XDG_CACHE_HOME/warpfix/files`` or ``~/.cache/warpfix/files``), not in the project: its entries
are pickles, and a project's own folder may come from anyone (a pickle it planted would run code).
``WARPFIX_CACHE_DIR=""`` turns it off. Unreadable, truncated or foreign entries are misses. Each
version of warpfix's code has its own sub-folder, and the first version to write removes the
others' (an editable install changes version at every edit)."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import sys

from warpfix.model.source import SourceFile

_FORMAT = 1  # bumped when what an entry holds changes


def cache_dir() -> str | None:
    env = os.environ.get("WARPFIX_CACHE_DIR")
    if env is not None:
        return os.path.join(env, "files") if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "warpfix", "files")


class FileCache:
    """Summaries by (path, contents); ``fingerprint`` names the code that computed them."""

    def __init__(self, fingerprint: str, folder: str | None = None) -> None:
        base = folder if folder is not None else cache_dir()
        self.salt = f"{_FORMAT}|{fingerprint}|{sys.version_info[:2]}".encode()
        # one sub-folder per version of the code: the first store of a new version clears the others
        self.base = base
        self.folder = os.path.join(base, hashlib.sha256(self.salt).hexdigest()[:16]) if base else None
        self._pruned = False
        self._made: set[str] = set()  # folders known to exist
        self.hits = self.misses = 0

    def _prune(self) -> None:
        """Remove the entries other versions of warpfix wrote (once per cache object)."""
        self._pruned = True
        if not self.base or not self.folder or os.path.isdir(self.folder):
            return
        try:
            names = os.listdir(self.base)
        except OSError:
            return
        for name in names:
            path = os.path.join(self.base, name)
            if path != self.folder and len(name) == 16 and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)

    def _file(self, path: str, text: str) -> str | None:
        if not self.folder:
            return None
        h = hashlib.sha256(self.salt)
        h.update(path.encode("utf-8", "surrogatepass") + b"\0")
        h.update(text.encode("utf-8", "surrogatepass"))
        key = h.hexdigest()
        return os.path.join(self.folder, key[:2], key[2:] + ".pickle")

    def load(self, path: str, text: str, module_name: str) -> SourceFile | None:
        """The file as :meth:`SourceFile.scan` left it (tree released), or None."""
        file = self._file(path, text)
        if file is None:
            return None
        try:
            with open(file, "rb") as fh:
                blob = fh.read()
        except OSError:
            self.misses += 1
            return None
        src = decode(path, text, module_name, blob)
        if src is None:
            self.misses += 1
        else:
            self.hits += 1
        return src

    def store(self, src: SourceFile) -> None:
        """Remember a scanned file (before its kernel facts are taken by a model)."""
        if src._kernels is not None:
            self.write(src.path, src.text, encode(src))

    def write(self, path: str, text: str, blob: bytes) -> None:
        r"""Remember the :func:`encode`\ d file ``path`` of contents ``text``."""
        file = self._file(path, text)
        if file is None:
            return
        if not self._pruned:
            self._prune()
        folder = os.path.dirname(file)
        try:
            if folder not in self._made:
                os.makedirs(folder, exist_ok=True)
                self._made.add(folder)
            # written in place: an entry cut short (a concurrent check, a crash) fails to load, a miss
            with open(file, "wb") as fh:
                fh.write(blob)
        except OSError:
            pass


def encode(src: SourceFile) -> bytes:
    """A scanned file's summary, kernel facts and imports, as bytes (no tree, no node)."""
    kernels = src._kernels or []
    sources = [(k, k.source, k._node) for k in kernels]
    try:
        for k in kernels:
            k.source, k._node = None, None
        return pickle.dumps((src.path, src.summary, kernels, src.warp, src.project_imports),
                            protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        for k, source, node in sources:
            k.source, k._node = source, node


def decode(path: str, text: str, module_name: str, blob: bytes) -> SourceFile | None:
    """The file :func:`encode` wrote, released (its tree parsed again when asked for), or None
    when the bytes are not such a file of ``path``."""
    try:
        stored_path, summary, kernels, warp, imports = pickle.loads(blob)
    except (EOFError, ValueError, TypeError, AttributeError, ImportError, IndexError, pickle.UnpicklingError):
        return None
    if stored_path != path:
        return None
    src = SourceFile(path, text, None, warp, imports, module_name)
    src._summary = summary
    for k in kernels:
        k.source = src
    src._kernels = kernels
    return src
