"""The warpfix language server (``warpfix lsp``): pygls over stdio.

- Diagnostics on open and save, and on change after a short pause (debounced). Each carries
  the rule ID as its code, a link to the rule doc where the package declares a
  ``Documentation`` URL, the related places, and in ``data`` which finding it is. No fix is
  computed for a diagnostic: a codemod rewrites whole files, far too slow to run per finding
  on every keystroke.
- Code actions: one quick fix per finding that has a fix (a ``WorkspaceEdit`` over every file
  the codemod touches; unsafe fixes are offered with "(unsafe)" in the title and are never
  preferred), "Disable WFnnn for this line" (adds ``# warpfix: ignore[WFnnn]``), and
  ``source.fixAll.warpfix`` with every safe fix of the file. The edits of a fix are computed
  when the client resolves the action (``codeAction/resolve``), or in the ``codeAction``
  request itself for a client that cannot resolve edits; never for an action not asked for.
- Hover over a finding shows its rule's documentation.

The open Python documents of the editor are checked together with the Python files of their
folders joined to them by imports (either way, transitively) and the project modules they
import (both read from disk), so findings and fixes that span files (a kernel and its launch
sites) work; diagnostics are published for the open documents. The other files of the folders
are not re-analysed on each change: what they record on tapes, which sets the model's
project-wide switches, is computed once per content of those files.
Configuration is the nearest ``[tool.warpfix]``; the client may add ``select``/``ignore``
lists as initialization options. A file that does not parse shows one error diagnostic; an
internal error is logged to the client and never stops the server.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import hashlib
import io
import os
import re
import tokenize
import traceback
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer
from pygls.workspace import PositionCodec

from warpfix import __version__
from warpfix.config import Config, ConfigError, load_config
from warpfix.engine import (
    CheckResult,
    InputError,
    ParseCache,
    ParseFn,
    check_sources,
    parse_file,
    read_source,
    sources_recording,
)
from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model.source import SourceFile
from warpfix.report.base import rule_doc_url
from warpfix.report.diff import line_hunks
from warpfix.report.fixedits import fix_changes
from warpfix.rules import rule_by_id

SOURCE = "warpfix"
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
DEBOUNCE_SECONDS = 0.05  # coalesces a burst of keystrokes (key repeat); a lint of a stale version is dropped
MAX_NEIGHBOURS = 200  # Python files read per folder of an open document
_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}
_IGNORE_LIST = re.compile(r"(#\s*warpfix:\s*ignore)\[([^\]]*)\]", re.IGNORECASE)
_BARE_IGNORE = re.compile(r"#\s*warpfix:\s*ignore(?!\[)", re.IGNORECASE)


# -- edits ------------------------------------------------------------------------------------


def _position(lines: Sequence[str], line: int, char: int, codec: PositionCodec) -> types.Position:
    """A 0-based (line, code point) position in the client's units."""
    if line >= len(lines):
        return types.Position(line=line, character=0)
    return codec.position_to_client_units(lines, types.Position(line=line, character=char))


def text_edits(old: str, new: str, codec: PositionCodec) -> list[types.TextEdit]:
    """Whole-line edits that turn ``old`` into ``new``."""
    lines = old.splitlines(keepends=True)
    edits = []
    for hunk in line_hunks(old, new):
        start = types.Position(line=hunk.start, character=0)
        if hunk.end == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
            # no line after the last one: end at the end of the text
            end = _position(lines, len(lines) - 1, len(lines[-1]), codec)
        else:
            end = types.Position(line=hunk.end, character=0)
        edits.append(types.TextEdit(range=types.Range(start=start, end=end), new_text=hunk.text))
    return edits


def ignore_comment_edit(text: str, line: int, rule: str) -> types.TextEdit | None:
    """The edit that adds ``rule`` to the ``# warpfix: ignore[...]`` comment of 0-based ``line``.

    None when the line cannot take a comment (it ends inside a string or with a backslash
    continuation) or already suppresses the rule.
    """
    lines = text.splitlines()
    if line >= len(lines):
        return None
    body = lines[line]
    comment: tokenize.TokenInfo | None = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.start[0] > line + 1:
                break
            if tok.type == tokenize.STRING and tok.start[0] <= line + 1 < tok.end[0]:
                return None
            if tok.type == tokenize.COMMENT and tok.start[0] == line + 1:
                comment = tok
    except (tokenize.TokenError, SyntaxError):
        pass  # a broken file: the line's own text still decides
    if comment is None and body.rstrip().endswith("\\"):
        return None
    if comment is not None:
        if _BARE_IGNORE.search(comment.string):
            return None
        match = _IGNORE_LIST.search(comment.string)
        if match:
            ids = [i.strip() for i in match.group(2).split(",") if i.strip()]
            if any(rule.startswith(i.upper()) for i in ids):  # IDs or prefixes, as suppression reads them
                return None
            start = comment.start[1] + match.start(2)
            end = comment.start[1] + match.end(2)
            return _edit(line, start, end, ", ".join([*ids, rule]))
    end = len(body.rstrip())
    return _edit(line, end, len(body), f"  # warpfix: ignore[{rule}]")


def _edit(line: int, start: int, end: int, text: str) -> types.TextEdit:
    # Columns here are code points; the caller converts them for the client.
    span = types.Range(types.Position(line=line, character=start), types.Position(line=line, character=end))
    return types.TextEdit(range=span, new_text=text)


# -- the server -------------------------------------------------------------------------------


@dataclass
class _Checked:
    """The last lint of one document: what its diagnostics and code actions are built from."""

    version: int | None
    findings: list[Finding]
    sources: dict[str, str]


@dataclass
class _Snapshot:
    """The open documents at one moment (taken on the event loop, linted in the worker)."""

    sources: dict[str, str]
    versions: dict[str, int | None]  # uri -> version
    uris: dict[str, str]  # path -> uri
    config: Config
    codec: PositionCodec
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    parse_cache: ParseCache | None = None  # the server's: only the worker thread uses it


def _anchored(config: Config) -> Config:
    """``per-file-ignores`` patterns also anchored at the pyproject's folder (documents have absolute paths)."""
    if config.path is None or not config.per_file_ignores:
        return config
    base = os.path.dirname(config.path)
    patterns = dict(config.per_file_ignores)
    for pattern, ids in config.per_file_ignores.items():
        if not os.path.isabs(pattern):
            patterns[os.path.join(base, pattern)] = ids
    return dataclasses.replace(config, per_file_ignores=patterns)


def _path_of(uri: str) -> str:
    return uris.to_fs_path(uri) or uri


def _uri_of(path: str, known: Mapping[str, str]) -> str:
    return known.get(path) or uris.from_fs_path(path) or path


class WarpfixServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(SOURCE, __version__)
        self.checked: dict[str, _Checked] = {}
        self.select: list[str] = []
        self.ignore: list[str] = []
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warpfix-lint")
        self.resolves_edits = False  # the client fills a code action's edit with codeAction/resolve
        self.parse_cache = ParseCache()  # unchanged neighbours are not parsed again on each change

    # -- linting ----------------------------------------------------------------------------
    def _python_documents(self) -> dict[str, Any]:
        return {
            uri: doc
            for uri, doc in self.workspace.text_documents.items()
            if doc.language_id == "python" or uri.endswith((".py", ".pyi"))
        }

    def _config_for(self, path: str) -> Config:
        try:
            config = load_config(path)
        except ConfigError as exc:
            self.log(types.MessageType.Warning, str(exc))
            return Config()
        return _anchored(config)

    def snapshot(self, uri: str) -> _Snapshot:
        docs = self._python_documents()
        path_uris = {_path_of(u): u for u in docs}
        return _Snapshot(
            sources={_path_of(u): d.source for u, d in docs.items()},
            versions={u: d.version for u, d in docs.items()},
            uris=path_uris,
            config=self._config_for(_path_of(uri)),
            codec=self.workspace.position_codec,
            select=list(self.select),
            ignore=list(self.ignore),
            parse_cache=self.parse_cache,
        )

    def log(self, kind: types.MessageType, message: str) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=f"warpfix: {message}"))

    def schedule(self, uri: str, delay: float) -> None:
        """Lint ``uri`` (and the other open documents) after ``delay`` seconds, replacing a pending lint."""
        pending = self._pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self._pending[uri] = asyncio.get_running_loop().create_task(self._lint_later(uri, delay))

    async def _lint_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        if uri not in self.workspace.text_documents:
            return
        snap = self.snapshot(uri)
        loop = asyncio.get_running_loop()
        try:
            published = await loop.run_in_executor(self._worker, lint_snapshot, snap)
        except Exception:  # a bug in a rule must not take the editor's server down
            self.log(types.MessageType.Error, f"checking {uri} failed:\n{traceback.format_exc()}")
            return
        finally:
            if self._pending.get(uri) is asyncio.current_task():
                del self._pending[uri]
        for doc_uri, (checked, diagnostics) in published.documents.items():
            current = self.workspace.text_documents.get(doc_uri)
            if current is None or current.version != checked.version:
                continue  # edited meanwhile: the lint scheduled by that edit publishes
            self.checked[doc_uri] = checked
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=doc_uri, diagnostics=diagnostics, version=checked.version)
            )

    async def checked_now(self, uri: str) -> _Checked | None:
        """The lint of the document's current version, linting now (in the worker) when it is stale."""
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return None
        checked = self.checked.get(uri)
        if checked is None or checked.version != doc.version:
            loop = asyncio.get_running_loop()
            published = await loop.run_in_executor(self._worker, lint_snapshot, self.snapshot(uri))
            if uri not in published.documents:
                return None
            checked = published.documents[uri][0]
            self.checked[uri] = checked
        return checked

    # -- code actions and hover -------------------------------------------------------------
    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        only = params.context.only
        actions: list[types.CodeAction] = []
        if _wanted(only, types.CodeActionKind.QuickFix):
            for diagnostic in params.context.diagnostics:
                if diagnostic.source == SOURCE and isinstance(diagnostic.data, dict):
                    actions.extend(self._quick_fixes(uri, diagnostic))
        if _wanted(only, FIX_ALL_KIND):
            fix_all = await self._fix_all(uri)
            if fix_all is not None:
                actions.append(fix_all)
        if not self.resolves_edits:
            actions = [await self.resolve(a) if a.edit is None else a for a in actions]
        return actions

    def _quick_fixes(self, uri: str, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
        data = diagnostic.data
        rule = str(data.get("rule", diagnostic.code))
        actions = []
        doc = self.workspace.text_documents.get(uri)
        checked = self.checked.get(uri)
        # A diagnostic of an older version of the document names a finding that may have moved;
        # the lint of the current version publishes fresh ones.
        current = doc is not None and checked is not None and data.get("version") == doc.version == checked.version
        if current and data.get("fix") and isinstance(data.get("span"), list):
            unsafe = data.get("safety") == FixSafety.UNSAFE.value
            actions.append(
                types.CodeAction(
                    title=f"{rule}: {data.get('fix', 'apply the fix')}" + (" (unsafe)" if unsafe else ""),
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=not unsafe,
                    data={"uri": uri, "version": doc.version, "rule": rule, "span": data["span"]},
                )
            )
        if doc is not None:
            edit = ignore_comment_edit(doc.source, diagnostic.range.start.line, rule)
            if edit is not None:
                lines = doc.lines
                client = types.TextEdit(
                    range=self.workspace.position_codec.range_to_client_units(lines, edit.range),
                    new_text=edit.new_text,
                )
                actions.append(
                    types.CodeAction(
                        title=f"Disable {rule} for this line",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        edit=types.WorkspaceEdit(changes={uri: [client]}),
                    )
                )
        return actions

    async def _fix_all(self, uri: str) -> types.CodeAction | None:
        checked = await self.checked_now(uri)
        if checked is None or not any(f.fix.safety is FixSafety.SAFE for f in checked.findings):
            return None
        data = {"uri": uri, "version": checked.version, "all": True}
        return types.CodeAction(title="warpfix: fix all safe fixes", kind=FIX_ALL_KIND, data=data)

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """Fill in the edit of a fix action (the codemods run here, in the worker thread). An action
        for a version of the document that is no longer current comes back without an edit."""
        data = action.data if isinstance(action.data, dict) else {}
        uri = data.get("uri")
        checked = self.checked.get(uri) if isinstance(uri, str) else None
        doc = self.workspace.text_documents.get(uri) if isinstance(uri, str) else None
        if checked is None or doc is None or not data.get("version") == doc.version == checked.version:
            return action
        if data.get("all"):
            findings = [f for f in checked.findings if f.fix.safety is FixSafety.SAFE]
            unsafe = False
        else:
            findings = [f for f in checked.findings if f.rule == data.get("rule") and _span_key(f) == data.get("span")]
            unsafe = True
        if not findings:
            return action
        loop = asyncio.get_running_loop()
        try:
            changes = await loop.run_in_executor(
                self._worker, partial(fix_changes, checked.sources, findings, unsafe=unsafe)
            )
        except Exception:  # a codemod bug costs this fix, not the server
            self.log(types.MessageType.Error, f"fix of {data.get('rule', 'all')} in {uri} failed:\n"
                     f"{traceback.format_exc()}")
            return action
        if changes:
            known = {_path_of(u): u for u in self.workspace.text_documents}
            codec = self.workspace.position_codec
            action.edit = types.WorkspaceEdit(
                changes={_uri_of(p, known): text_edits(old, new, codec) for p, (old, new) in sorted(changes.items())}
            )
        return action

    def hover(self, params: types.HoverParams) -> types.Hover | None:
        checked = self.checked.get(params.text_document.uri)
        doc = self.workspace.text_documents.get(params.text_document.uri)
        if checked is None or doc is None or checked.version != doc.version:
            return None
        pos = self.workspace.position_codec.position_from_client_units(doc.lines, params.position)
        line, char = pos.line + 1, pos.character + 1
        docs: list[str] = []
        hit: Span | None = None
        for finding in checked.findings:
            s = finding.span
            if (s.line, s.column) <= (line, char) <= (s.end_line, max(s.end_column, s.column + 1)):
                rule = rule_by_id(finding.rule)
                text = rule.render_doc() if rule is not None else f"# {finding.rule} {finding.name}\n"
                if text not in docs:
                    docs.append(text)
                hit = hit or s
        if not docs or hit is None:
            return None
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n---\n\n".join(docs)),
            range=_range(doc.lines, hit, self.workspace.position_codec),
        )


def _wanted(only: Sequence[str] | None, kind: str) -> bool:
    """Whether an action of ``kind`` matches the client's ``only`` filter (kinds are hierarchical)."""
    if not only:
        return True
    return any(kind == k or kind.startswith(f"{k}.") for k in only)


# -- lint: snapshot -> diagnostics (runs in the worker thread) ------------------------------------


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
            text, _ = read_source(path)
            if text is not None:
                out[path] = text
    return out


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


def _related(open_docs: Mapping[str, str], neighbours: Mapping[str, str], parse: ParseFn) -> dict[str, str]:
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
        h.update(path.encode() + b"\0" + hashlib.sha256(files[path].encode()).digest())
    return h.hexdigest()


def _remember(key: str, recording: tuple[bool, bool]) -> tuple[bool, bool]:
    """Keep what a set of neighbours records (they do not import the documents, so editing a
    document cannot change it); only the lint worker thread calls this."""
    _OTHERS_RECORD[key] = recording
    if len(_OTHERS_RECORD) > _OTHERS_RECORD_SIZE:
        _OTHERS_RECORD.popitem(last=False)
    return recording


@dataclass
class _Lint:
    """What one lint produced: per open document its state and diagnostics."""

    documents: dict[str, tuple[_Checked, list[types.Diagnostic]]]


def lint_snapshot(snap: _Snapshot) -> _Lint:
    """Check every document of the snapshot; the diagnostics of each open document."""
    parse = snap.parse_cache.parse if snap.parse_cache is not None else parse_file
    neighbours = _neighbours(list(snap.sources))
    related = _related(snap.sources, neighbours, parse)

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
    out = _Lint({})
    for path, findings in by_path.items():
        uri = snap.uris[path]
        lines = snap.sources[path].splitlines(keepends=True)
        diagnostics = [
            _diagnostic(f, lines, sources, snap, snap.versions.get(uri)) for f in findings
        ]
        if path in errors:
            diagnostics.insert(0, _error_diagnostic(errors[path], snap.sources[path], snap.codec))
        out.documents[uri] = (_Checked(snap.versions.get(uri), findings, sources), diagnostics)
    return out


def _range(lines: Sequence[str], span: Span, codec: PositionCodec) -> types.Range:
    start = _position(lines, span.line - 1, span.column - 1, codec)
    end = _position(lines, span.end_line - 1, max(span.end_column - 1, 0), codec)
    return types.Range(start=start, end=end)


def _diagnostic(
    finding: Finding,
    lines: Sequence[str],
    sources: Mapping[str, str],
    snap: _Snapshot,
    version: int | None,
) -> types.Diagnostic:
    data: dict[str, Any] = {"rule": finding.rule, "safety": finding.fix.safety.value, "version": version}
    if finding.fix.safety is not FixSafety.NONE:
        data["fix"] = finding.fix.description
        data["span"] = _span_key(finding)
    related = []
    for span, message in finding.related:
        other = lines if span.path == finding.path else sources.get(span.path, "").splitlines(keepends=True)
        location = types.Location(uri=_uri_of(span.path, snap.uris), range=_range(other, span, snap.codec))
        related.append(types.DiagnosticRelatedInformation(location=location, message=message))
    url = rule_doc_url(finding.rule)
    return types.Diagnostic(
        range=_range(lines, finding.span, snap.codec),
        severity=_SEVERITY[finding.severity],
        code=finding.rule,
        code_description=types.CodeDescription(href=url) if url else None,
        source=SOURCE,
        message=f"{finding.message} ({finding.name})",
        related_information=related or None,
        data=data,
    )


def _span_key(finding: Finding) -> list[int]:
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
    start = _position(lines, line, col, codec)
    end = _position(lines, line, len(lines[line].rstrip("\r\n")) if line < len(lines) else 0, codec)
    if end.character <= start.character:
        end = types.Position(line=start.line, character=start.character + 1)
    return types.Diagnostic(
        range=types.Range(start=start, end=end),
        severity=types.DiagnosticSeverity.Error,
        source=SOURCE,
        message=f"warpfix cannot check this file: {error.message}",
    )


# -- wiring -----------------------------------------------------------------------------------


def create_server() -> WarpfixServer:
    server = WarpfixServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: WarpfixServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        code_action = params.capabilities.text_document and params.capabilities.text_document.code_action
        resolvable = code_action and code_action.resolve_support and code_action.resolve_support.properties
        ls.resolves_edits = bool(code_action and code_action.data_support and "edit" in (resolvable or ()))
        if isinstance(options, dict):
            ls.select = [str(s).upper() for s in options.get("select", [])]
            ls.ignore = [str(s).upper() for s in options.get("ignore", [])]

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: WarpfixServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: WarpfixServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, DEBOUNCE_SECONDS)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: WarpfixServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: WarpfixServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        pending = ls._pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        ls.checked.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=True
        ),
    )
    async def code_action(ls: WarpfixServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        try:
            return await ls.code_actions(params)
        except Exception:
            ls.log(types.MessageType.Error, f"code actions failed:\n{traceback.format_exc()}")
            return []

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: WarpfixServer, action: types.CodeAction) -> types.CodeAction:
        try:
            return await ls.resolve(action)
        except Exception:
            ls.log(types.MessageType.Error, f"resolving a code action failed:\n{traceback.format_exc()}")
            return action

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: WarpfixServer, params: types.HoverParams) -> types.Hover | None:
        return ls.hover(params)

    return server


def main() -> None:
    """Serve over stdin/stdout until the client exits."""
    create_server().start_io()
