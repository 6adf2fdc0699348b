"""The language server itself: the document events, debounced lints, code actions (resolved
lazily) and hover, wired to pygls."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import traceback
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer

from warpfix import __version__
from warpfix.config import Config, ConfigError, load_config
from warpfix.finding import FixSafety, Span
from warpfix.lsp.edits import ignore_comment_edit, text_edits
from warpfix.lsp.lint import SOURCE, Checked, Snapshot, lint_snapshot, span_key, span_range, uri_of
from warpfix.reading import ParseCache
from warpfix.report.fixedits import fix_outcome
from warpfix.rules import rule_by_id

FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
# A change while a lint of the document is pending or running waits this long for the next one
# (coalescing a burst of keystrokes, key repeat); a change to an idle document is linted at once.
# A lint of a stale version is dropped.
DEBOUNCE_SECONDS = 0.05


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



class WarpfixServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(SOURCE, __version__)
        self.checked: dict[str, Checked] = {}
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

    def snapshot(self, uri: str) -> Snapshot:
        docs = self._python_documents()
        path_uris = {_path_of(u): u for u in docs}
        return Snapshot(
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

    def changed(self, uri: str) -> None:
        """Lint after a change: at once when no lint of ``uri`` is pending or running (a lone edit
        does not wait), else after the debounce (the lint in flight is of a version already stale)."""
        pending = self._pending.get(uri)
        self.schedule(uri, DEBOUNCE_SECONDS if pending is not None and not pending.done() else 0)

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

    async def checked_now(self, uri: str) -> Checked | None:
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
            findings = [f for f in checked.findings if f.rule == data.get("rule") and span_key(f) == data.get("span")]
            unsafe = True
        if not findings:
            return action
        loop = asyncio.get_running_loop()
        try:
            changes, refused = await loop.run_in_executor(
                self._worker, partial(fix_outcome, checked.sources, findings, unsafe=unsafe)
            )
        except Exception:  # a codemod bug costs this fix, not the server
            self.log(types.MessageType.Error, f"fix of {data.get('rule', 'all')} in {uri} failed:\n"
                     f"{traceback.format_exc()}")
            return action
        if changes:
            known = {_path_of(u): u for u in self.workspace.text_documents}
            codec = self.workspace.position_codec
            action.edit = types.WorkspaceEdit(
                changes={uri_of(p, known): text_edits(old, new, codec) for p, (old, new) in sorted(changes.items())}
            )
        elif refused and not data.get("all"):  # the user picked this fix: say why nothing changes
            self.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning, message=f"warpfix: no automatic fix for {data.get('rule')}: {refused[0]}"))
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
            range=span_range(doc.lines, hit, self.workspace.position_codec),
        )


def _wanted(only: Sequence[str] | None, kind: str) -> bool:
    """Whether an action of ``kind`` matches the client's ``only`` filter (kinds are hierarchical)."""
    if not only:
        return True
    return any(kind == k or kind.startswith(f"{k}.") for k in only)




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
        ls.changed(params.text_document.uri)

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
