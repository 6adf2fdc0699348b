"""Reading a project's files into the model's :class:`~warpfix.model.source.SourceFile` objects:
parsing (with a one-line reason for a file that cannot be), the editor's parse cache, following
the imports of the given files into their neighbours, and, for a large project, summarising each
file and releasing its tree (:meth:`SourceFile.scan`), through the file-summary cache
(:mod:`warpfix.model.file_cache`) and, with ``jobs > 1``, in forked processes."""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Callable

from warpfix.discovery import InputError, read_source
from warpfix.model import SourceFile, module_name_for
from warpfix.model.file_cache import FileCache, decode, encode
from warpfix.model.project_files import mentions_warp
from warpfix.notebook import cell_position, is_notebook

PARALLEL_MIN_FILES = 32  # smaller projects check faster than a process pool starts
# source above which a check releases each file's syntax tree once it is summarised (parsed again
# where an analysis looks into it): memory follows what the analyses read, not the project's size
RELEASE_ABOVE_BYTES = 2_000_000


def parse_file(path: str, text: str, index: bool = True) -> tuple[SourceFile | None, str | None]:
    try:
        return SourceFile.parse(path, text, module_name_for(path), index), None
    except SyntaxError as exc:
        where = f"line {exc.lineno}"
        cell = cell_position(text, exc.lineno or 0) if is_notebook(path) else None
        if cell is not None:
            where = f"cell {cell[0]}, line {cell[1]}"
        return None, f"syntax error at {where}: {exc.msg} (parsed as Python {sys.version_info[0]}.{sys.version_info[1]})"
    except RecursionError:
        return None, "nesting too deep to parse, skipped"
    except (ValueError, MemoryError) as exc:
        return None, f"cannot parse: {exc}"


class ParseCache:
    """The last parse of each path, for a process that checks nearly the same files again and
    again (the language server re-checks an open document's folder on every change). A parsed file
    is only read by the model and the rules, never changed, so it can serve the next check of the
    same text. Holds at most ``size`` paths (least recently used go first)."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._entries: OrderedDict[str, tuple[str, tuple[SourceFile | None, str | None]]] = OrderedDict()

    def parse(self, path: str, text: str) -> tuple[SourceFile | None, str | None]:
        hit = self._entries.get(path)
        if hit is not None and hit[0] == text:
            self._entries.move_to_end(path)
            return hit[1]
        result = parse_file(path, text)
        self._entries[path] = (text, result)
        self._entries.move_to_end(path)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return result


ParseFn = Callable[[str, str], tuple[SourceFile | None, str | None]]


def follow_imports(
    files: dict[str, SourceFile], errors: list[InputError], parse: ParseFn = parse_file
) -> None:
    """Add the project modules that the given files import from the same tree (next to the importer)."""
    queue = list(files.values())
    known = {os.path.realpath(p) for p in files}
    looked: set[str] = set()  # candidate paths already looked at (a package's files import alike)
    while queue:
        src = queue.pop()
        base_dir = os.path.dirname(src.path)
        for mod, level, name, _ in src.project_imports:
            if level > 1:
                continue
            rels = [mod.replace(".", os.sep)] if mod else []
            if name and name != "*":
                rels.append(os.path.join(mod.replace(".", os.sep), name) if mod else name)
            for rel in rels:
                for cand in (os.path.join(base_dir, rel + ".py"), os.path.join(base_dir, rel, "__init__.py")):
                    if cand in looked:
                        continue
                    looked.add(cand)
                    real = os.path.realpath(cand)
                    if real in known or not os.path.isfile(cand):
                        continue
                    known.add(real)
                    text, err = read_source(cand)
                    if text is None or not mentions_warp(text):
                        continue
                    parsed, err = parse(os.path.normpath(cand), text)
                    if parsed is None:
                        errors.append(InputError(os.path.normpath(cand), err or "cannot parse"))
                        continue
                    files[parsed.path] = parsed
                    queue.append(parsed)


# ------------------------------------------------------------------------------- a whole project
def read_project(texts: dict[str, str], jobs: int, fingerprint: str | None
                 ) -> tuple[dict[str, SourceFile], list[InputError]]:
    """The files of ``texts`` and the project modules they import, parsed; a large project's
    summarised and released, through the file cache when ``fingerprint`` names warpfix's code (None:
    no cache), read in ``jobs`` forked processes when there are enough of them."""
    parse: ParseFn = parse_file
    large = sum(map(len, texts.values())) > RELEASE_ABOVE_BYTES
    cache = FileCache(fingerprint) if large and fingerprint is not None else None
    if large:
        parse = cached_parse(cache) if cache is not None else parse_and_release
    if large and jobs > 1 and len(texts) >= PARALLEL_MIN_FILES and can_fork():
        files, errors = scan_forked(texts, jobs, cache)
    else:
        files, errors = parse_all(texts, parse)
    follow_imports(files, errors, parse)
    return files, errors


def can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def parse_all(texts: dict[str, str], parse: ParseFn = parse_file) -> tuple[dict[str, SourceFile], list[InputError]]:
    """Parse in this process: sending syntax trees back from worker processes costs more than
    parsing them (measured: twice the CPU and a longer wall time on warp's sources)."""
    out: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    for path, text in sorted(texts.items()):
        parsed, err = parse(path, text)
        if parsed is None:
            errors.append(InputError(path, err or "cannot parse"))
        else:
            out[path] = parsed
    return out, errors


# the texts the forked scan workers read: set before the pool forks, so each worker inherits them
_SCAN: tuple[dict[str, str], FileCache | None] | None = None


def scan_forked(texts: dict[str, str], jobs: int, cache: FileCache | None
                 ) -> tuple[dict[str, SourceFile], list[InputError]]:
    """:func:`parse_all` with :func:`parse_and_release`, the files the cache does not hold read in
    ``jobs`` forked processes. A worker sends back each file's summary and kernel facts as the
    bytes it also writes to the cache (no tree crosses processes); the result is the same, in the
    same order, as one process's."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _SCAN
    found: dict[str, SourceFile | InputError] = {}
    todo = []
    for path, text in texts.items():
        hit = cache.load(path, text, module_name_for(path)) if cache is not None else None
        if hit is not None:
            found[path] = hit
        else:
            todo.append(path)
    if todo:
        todo.sort(key=lambda p: -len(texts[p]))  # the largest first: the chunks end together
        chunks = [todo[k::jobs * 4] for k in range(jobs * 4)]
        _SCAN = (texts, cache)
        try:
            with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
                for results in pool.map(_scan_chunk, [c for c in chunks if c]):
                    for path, blob, err in results:
                        src = decode(path, texts[path], module_name_for(path), blob) if blob is not None else None
                        found[path] = src if src is not None else InputError(path, err or "cannot parse")
        finally:
            _SCAN = None
    out: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    for path in sorted(texts):
        item = found[path]
        if isinstance(item, InputError):
            errors.append(item)
        else:
            out[path] = item
    return out, errors


def _scan_chunk(paths: list[str]) -> list[tuple[str, bytes | None, str | None]]:
    assert _SCAN is not None
    texts, cache = _SCAN
    out: list[tuple[str, bytes | None, str | None]] = []
    for path in paths:
        parsed, err = parse_and_release(path, texts[path])
        if parsed is None:
            out.append((path, None, err))
            continue
        blob = encode(parsed)
        if cache is not None:
            cache.write(path, texts[path], blob)
        out.append((path, blob, None))
    return out


def cached_parse(cache: FileCache) -> ParseFn:
    """:func:`parse_and_release` through the file cache: an unchanged file is not read again."""
    def parse(path: str, text: str) -> tuple[SourceFile | None, str | None]:
        hit = cache.load(path, text, module_name_for(path))
        if hit is not None:
            return hit, None
        parsed, err = parse_and_release(path, text)
        if parsed is not None:
            cache.store(parsed)
        return parsed, err
    return parse


def parse_and_release(path: str, text: str) -> tuple[SourceFile | None, str | None]:
    """:func:`parse_file`, then what the model needs of the file read and its tree released: a
    large project holds a tree only for the files its analyses look into (parsed again then). A
    file that creates a tape keeps its tree: its roots are the ones a check interprets."""
    parsed, err = parse_file(path, text, index=False)
    if parsed is not None:
        try:
            parsed.scan()
        except RecursionError:
            return None, "nesting too deep for the analysis, skipped"
        if not any(unit.seed for unit in parsed.summary.units.values()):
            parsed.release()
    return parsed, err
