"""One lint of the language server (runs in its worker thread): the open documents at one moment,
checked with the neighbours joined to them by imports, turned into diagnostics."""

from __future__ import annotations

import ast
import hashlib
import os
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.workspace import PositionCodec

from warpfix.config import Config
from warpfix.engine import CheckResult, InputError, check_sources, read_source, sources_recording
from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.lsp.edits import position
from warpfix.model.source import SourceFile
from warpfix.reading import ParseCache, ParseFn, parse_file
from warpfix.report.base import rule_doc_url

SOURCE = "warpfix"
MAX_NEIGHBOURS = 200  # Python files read per folder of an open document
_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}


@dataclass
class Checked:
    """The last lint of one document: what its diagnostics and code actions are built from."""

    version: int | None
    findings: list[Finding]
    sources: dict[str, str]


@dataclass
class Snapshot:
    """The open documents at one moment (taken on the event loop, linted in the worker)."""

    sources: dict[str, str]
    versions: dict[str, int | None]  # uri -> version
    uris: dict[str, str]  # path -> uri
    config: Config
    codec: PositionCodec
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    parse_cache: ParseCache | None = None  # the server's: only the worker thread uses it



def uri_of(path: str, known: Mapping[str, str]) -> str:
    return known.get(path) or uris.from_fs_path(path) or path



def _neighbours(paths: Sequence[str]) -> dict[str, str]:
    """The other Python files in the open documents' folders, as saved on disk.

    A fix may have to rewrite them too (a kernel's new parameter at its launch sites), and the
    module that launches a kernel usually imports it, not the other way round.
    """
    out: dict[str, str] = {}
    for folder in sorted({os.path.dirname(p) for p in paths if os.path.isabs(p)}):
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))[:MAX_NEIGHBOURS]
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            text = _read_neighbour(path)
            if text is not None:
                out[path] = text
    return out


@dataclass(frozen=True)
class _Saved:
    """A neighbour as last read: the stat fields that change when the file is rewritten, its text
    and the digest of the text."""

    stamp: tuple[int, int, int, int]
    text: str
    digest: bytes


_SAVED: OrderedDict[str, _Saved] = OrderedDict()  # path -> last read (only the lint worker thread)
_SAVED_SIZE = 4 * MAX_NEIGHBOURS
RACY_NS = 2_000_000_000  # a file modified this recently may change again within one mtime tick


def _read_neighbour(path: str) -> str | None:
    """The text of ``path``, read again only when its size, inode, mtime or ctime changed. A file
    modified in the last :data:`RACY_NS` is read every time (two writes within one tick of the
    file system's clock, of the same size, would keep every stamp)."""
    try:
        st = os.stat(path)
    except OSError:
        _SAVED.pop(path, None)
        return None
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    hit = _SAVED.get(path)
    if hit is not None and hit.stamp == stamp:
        _SAVED.move_to_end(path)
        return hit.text
    _SAVED.pop(path, None)
    text, _ = read_source(path)
    if text is not None and time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
        _SAVED[path] = _Saved(stamp, text, _digest(text))
        if len(_SAVED) > _SAVED_SIZE:
            _SAVED.popitem(last=False)
    return text


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _module_stem(path: str) -> str:
    """The last component of the module name ``path`` is imported by (a package: its folder)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.basename(os.path.dirname(path)) if stem == "__init__" else stem


def _imported_names(src: SourceFile) -> set[str]:
    """Every component of every module a file imports, and each imported name (over-inclusive:
    ``from .sim import step`` gives {"sim", "step"}; ``from . import x`` also the package itself)."""
    out: set[str] = set()
    for mod, level, name, _ in src.project_imports:
        out.update(p for p in mod.split(".") if p)
        if name and name != "*":
            out.add(name)
        if level and not mod:
            out.add(_module_stem(os.path.join(os.path.dirname(src.path), "__init__.py")))
    return out


def related_neighbours(open_docs: Mapping[str, str], neighbours: Mapping[str, str], parse: ParseFn) -> dict[str, str]:
    """The neighbours joined to the open documents by imports, either way and transitively.

    A neighbour that neither imports an open document nor is imported by one (nor by a file that
    is, and so on) cannot call the documents' code or be called by it, so it is left out of the
    project: the folder of a file among 93 unrelated Warp files is not re-interpreted on every
    change. Parses go through the server's parse cache, so the check that follows reuses them.
    """
    names: dict[str, set[str]] = {}
    for path, text in {**neighbours, **open_docs}.items():
        parsed, _ = parse(path, text)
        names[path] = _imported_names(parsed) if parsed is not None else set()
    joined = set(open_docs)
    todo = list(open_docs)
    rest = [p for p in sorted(neighbours) if p not in joined]
    while todo:
        path = todo.pop()
        stem = _module_stem(path)
        for other in list(rest):
            if stem in names[other] or _module_stem(other) in names[path]:
                rest.remove(other)
                joined.add(other)
                todo.append(other)
    return {p: t for p, t in neighbours.items() if p in joined}


_OTHERS_RECORD: OrderedDict[str, tuple[bool, bool]] = OrderedDict()  # content key -> recording()
_OTHERS_RECORD_SIZE = 64


def _content_key(files: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        saved = _SAVED.get(path)
        digest = saved.digest if saved is not None and saved.text is files[path] else _digest(files[path])
        h.update(path.encode() + b"\0" + digest)
    return h.hexdigest()


def _remember(key: str, recording: tuple[bool, bool]) -> tuple[bool, bool]:
    """Keep what a set of neighbours records (they do not import the documents, so editing a
    document cannot change it); only the lint worker thread calls this."""
    _OTHERS_RECORD[key] = recording
    if len(_OTHERS_RECORD) > _OTHERS_RECORD_SIZE:
        _OTHERS_RECORD.popitem(last=False)
    return recording


@dataclass
class Lint:
    """What one lint produced: per open document its state and diagnostics."""

    documents: dict[str, tuple[Checked, list[types.Diagnostic]]]


def lint_snapshot(snap: Snapshot) -> Lint:
    """Check every document of the snapshot; the diagnostics of each open document."""
    parse = snap.parse_cache.parse if snap.parse_cache is not None else parse_file
    neighbours = _neighbours(list(snap.sources))
    related = related_neighbours(snap.sources, neighbours, parse)

    def check(project: dict[str, str], elsewhere: tuple[bool, bool] = (False, False)) -> CheckResult:
        return check_sources(project, select=snap.select, ignore=snap.ignore, config=snap.config,
                             follow_imports=True, parse_cache=snap.parse_cache, recorded_elsewhere=elsewhere)

    others = {p: t for p, t in neighbours.items() if p not in related and p not in snap.sources}
    key = _content_key(others)
    known = _OTHERS_RECORD.get(key) if others else (False, False)
    result = check({**related, **snap.sources}, known or (False, False))
    if known is None and not all(result.recording):
        # What the unrelated neighbours record on tapes still sets the model's project-wide
        # switches (Project.recorded_elsewhere); found once per content of those files.
        theirs = _remember(key, sources_recording(dict(others), snap.parse_cache))
        if any(t and not mine for mine, t in zip(result.recording, theirs, strict=True)):
            result = check({**related, **snap.sources}, theirs)
    sources = {**result.sources, **snap.sources}
    by_path: dict[str, list[Finding]] = {p: [] for p in snap.sources}
    for finding in result.findings:
        if finding.path in by_path:
            by_path[finding.path].append(finding)
    errors = {e.path: e for e in result.errors if e.path in by_path}
    out = Lint({})
    for path, findings in by_path.items():
        uri = snap.uris[path]
        lines = snap.sources[path].splitlines(keepends=True)
        diagnostics = [
            _diagnostic(f, lines, sources, snap, snap.versions.get(uri)) for f in findings
        ]
        if path in errors:
            diagnostics.insert(0, _error_diagnostic(errors[path], snap.sources[path], snap.codec))
        out.documents[uri] = (Checked(snap.versions.get(uri), findings, sources), diagnostics)
    return out


def span_range(lines: Sequence[str], span: Span, codec: PositionCodec) -> types.Range:
    start = position(lines, span.line - 1, span.column - 1, codec)
    end = position(lines, span.end_line - 1, max(span.end_column - 1, 0), codec)
    return types.Range(start=start, end=end)


def _diagnostic(
    finding: Finding,
    lines: Sequence[str],
    sources: Mapping[str, str],
    snap: Snapshot,
    version: int | None,
) -> types.Diagnostic:
    data: dict[str, Any] = {"rule": finding.rule, "safety": finding.fix.safety.value, "version": version}
    if finding.fix.safety is not FixSafety.NONE:
        data["fix"] = finding.fix.description
        data["span"] = span_key(finding)
    related = []
    for span, message in finding.related:
        other = lines if span.path == finding.path else sources.get(span.path, "").splitlines(keepends=True)
        location = types.Location(uri=uri_of(span.path, snap.uris), range=span_range(other, span, snap.codec))
        related.append(types.DiagnosticRelatedInformation(location=location, message=message))
    url = rule_doc_url(finding.rule)
    return types.Diagnostic(
        range=span_range(lines, finding.span, snap.codec),
        severity=_SEVERITY[finding.severity],
        code=finding.rule,
        code_description=types.CodeDescription(href=url) if url else None,
        source=SOURCE,
        message=f"{finding.message} ({finding.name})",
        related_information=related or None,
        data=data,
    )


def span_key(finding: Finding) -> list[int]:
    """Which finding of a lint a diagnostic or an action stands for (with its rule)."""
    s = finding.span
    return [s.line, s.column, s.end_line, s.end_column]


def _error_diagnostic(error: InputError, text: str, codec: PositionCodec) -> types.Diagnostic:
    """A file warpfix cannot check: at the syntax error when there is one, else at the top."""
    lines = text.splitlines(keepends=True)
    line = col = 0
    try:
        ast.parse(text)
    except SyntaxError as exc:
        line = max((exc.lineno or 1) - 1, 0)
        col = max((exc.offset or 1) - 1, 0)
    except (ValueError, RecursionError, MemoryError):
        pass
    if line < len(lines):
        col = min(col, len(lines[line].rstrip("\r\n")))
    start = position(lines, line, col, codec)
    end = position(lines, line, len(lines[line].rstrip("\r\n")) if line < len(lines) else 0, codec)
    if end.character <= start.character:
        end = types.Position(line=start.line, character=start.character + 1)
    return types.Diagnostic(
        range=types.Range(start=start, end=end),
        severity=types.DiagnosticSeverity.Error,
        source=SOURCE,
        message=f"warpfix cannot check this file: {error.message}",
    )
