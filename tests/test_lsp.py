"""End-to-end tests of ``warpfix lsp``: a pytest-lsp client drives the real server over stdio."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from warpfix.engine import check_sources

ROOT = Path(__file__).resolve().parents[1]

# `y` is allocated without requires_grad, written from `k` and read on the way to the loss: WF201.
BUGGY = """import numpy as np
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = k[0] * x[i]


@wp.kernel
def sq_err(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


n = 64
x = wp.array(np.linspace(0.0, 1.0, n), dtype=float)
target = wp.array(3.0 * np.linspace(0.0, 1.0, n), dtype=float)
k = wp.array([1.0], dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
y = wp.zeros(n, dtype=float)
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
"""
BUG_LINE = 22  # 0-based line of `y = wp.zeros(n, dtype=float)`

# The taped kernel has no adjoint: WF202, whose fix is unsafe.
UNSAFE = BUGGY.replace("@wp.kernel\ndef scale", "@wp.kernel(enable_backward=False)\ndef scale").replace(
    "y = wp.zeros(n, dtype=float)", "y = wp.zeros(n, dtype=float, requires_grad=True)"
)

TIMEOUT = 60.0
SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "warpfix", "lsp"],
    server_env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)},
)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=pytest_lsp.client_capabilities("visual-studio-code"),
        )
    )
    yield
    await lsp_client.shutdown_session()


# -- helpers ----------------------------------------------------------------------------------


async def until(predicate: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def diagnostics(client: LanguageClient, uri: str) -> list[types.Diagnostic] | None:
    found = client.diagnostics.get(uri)
    return None if found is None else list(found)


async def open_file(client: LanguageClient, path: Path, text: str) -> str:
    path.write_text(text)
    uri = path.as_uri()
    client.diagnostics.pop(uri, None)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    await until(lambda: diagnostics(client, uri) is not None, "the first diagnostics")
    return uri


async def change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.diagnostics.pop(uri, None)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    await until(lambda: diagnostics(client, uri) is not None, f"diagnostics of version {version}")


def offset(lines: list[str], pos: types.Position) -> int:
    # The test texts are ASCII: UTF-16 units are characters.
    return sum(len(line) for line in lines[: pos.line]) + pos.character


def apply_edits(text: str, edits: Sequence[types.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)
    spans = sorted(
        ((offset(lines, e.range.start), offset(lines, e.range.end), e.new_text) for e in edits), reverse=True
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


async def code_actions(
    client: LanguageClient, uri: str, diags: Sequence[types.Diagnostic], only: list[str] | None = None
) -> list[types.CodeAction]:
    whole = types.Range(
        start=types.Position(line=0, character=0), end=types.Position(line=BUG_LINE + 1, character=0)
    )
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diags[0].range if diags else whole,
            context=types.CodeActionContext(diagnostics=list(diags), only=only),
        )
    )
    return [a for a in result or [] if isinstance(a, types.CodeAction)]


async def resolved(client: LanguageClient, action: types.CodeAction) -> types.CodeAction:
    """The action with its edit, resolving it as an editor does when the user picks it."""
    if action.edit is not None:
        return action
    return await client.code_action_resolve_async(action)


async def resolved_all(client: LanguageClient, actions: Sequence[types.CodeAction]) -> list[types.CodeAction]:
    return [await resolved(client, a) for a in actions]


# -- tests ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_diagnostic_then_quick_fix_then_clean(client: LanguageClient, tmp_path: Path) -> None:
    uri = await open_file(client, tmp_path / "fit.py", BUGGY)
    (diag,) = diagnostics(client, uri)
    assert diag.code == "WF201"
    assert diag.source == "warpfix"
    assert diag.severity == types.DiagnosticSeverity.Error
    assert diag.range.start == types.Position(line=BUG_LINE, character=4)
    assert "requires_grad" in diag.message
    assert {r.message for r in diag.related_information or []} >= {"written here", "read here"}
    assert "edits" not in diag.data, "a lint computes no fix"

    actions = await code_actions(client, uri, [diag], only=[types.CodeActionKind.QuickFix])
    (fix,) = [a for a in actions if a.title.startswith("WF201:")]
    assert fix.kind == types.CodeActionKind.QuickFix
    assert fix.is_preferred
    assert "(unsafe)" not in fix.title
    assert fix.edit is None, "the edit is computed when the client resolves the action"
    fix = await resolved(client, fix)
    assert list(fix.edit.changes) == [uri]
    fixed = apply_edits(BUGGY, fix.edit.changes[uri])
    assert "y = wp.zeros(n, dtype=float, requires_grad=True)" in fixed

    await change(client, uri, 2, fixed)
    assert diagnostics(client, uri) == []
    assert check_sources({"fit.py": fixed}).findings == []


@pytest.mark.asyncio
async def test_disable_for_this_line(client: LanguageClient, tmp_path: Path) -> None:
    uri = await open_file(client, tmp_path / "fit.py", BUGGY)
    diags = diagnostics(client, uri)
    actions = await code_actions(client, uri, diags)
    (disable,) = [a for a in actions if a.title == "Disable WF201 for this line"]
    suppressed = apply_edits(BUGGY, disable.edit.changes[uri])
    assert suppressed.splitlines()[BUG_LINE] == "y = wp.zeros(n, dtype=float)  # warpfix: ignore[WF201]"
    await change(client, uri, 2, suppressed)
    assert diagnostics(client, uri) == []


@pytest.mark.asyncio
async def test_fix_all_source_action(client: LanguageClient, tmp_path: Path) -> None:
    uri = await open_file(client, tmp_path / "fit.py", BUGGY)
    actions = await code_actions(client, uri, [], only=[types.CodeActionKind.SourceFixAll])
    (fix_all,) = actions
    assert fix_all.kind == "source.fixAll.warpfix"
    fix_all = await resolved(client, fix_all)
    fixed = apply_edits(BUGGY, fix_all.edit.changes[uri])
    await change(client, uri, 2, fixed)
    assert diagnostics(client, uri) == []
    # nothing left to fix: no action
    assert await code_actions(client, uri, [], only=[types.CodeActionKind.SourceFixAll]) == []
    # a quick-fix request does not get the source action
    assert await code_actions(client, uri, [], only=[types.CodeActionKind.QuickFix]) == []


@pytest.mark.asyncio
async def test_unsafe_fix_is_offered_and_marked(client: LanguageClient, tmp_path: Path) -> None:
    uri = await open_file(client, tmp_path / "fit.py", UNSAFE)
    (diag,) = diagnostics(client, uri)
    assert diag.code == "WF202"
    actions = await code_actions(client, uri, [diag])
    (fix,) = [a for a in actions if a.title.startswith("WF202:")]
    assert fix.title.endswith("(unsafe)")
    assert not fix.is_preferred
    fix = await resolved(client, fix)
    fixed = apply_edits(UNSAFE, fix.edit.changes[uri])
    assert "enable_backward" not in fixed
    # the safe fix-all leaves unsafe fixes alone
    assert await code_actions(client, uri, [], only=[types.CodeActionKind.SourceFixAll]) == []


@pytest.mark.asyncio
async def test_hover_shows_the_rule_doc(client: LanguageClient, tmp_path: Path) -> None:
    uri = await open_file(client, tmp_path / "fit.py", BUGGY)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=BUG_LINE, character=8),
        )
    )
    assert hover is not None
    assert hover.contents.kind == types.MarkupKind.Markdown
    assert hover.contents.value.startswith("# WF201 missing-requires-grad")
    assert "## Why is this bad?" in hover.contents.value
    nothing = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=0)
        )
    )
    assert nothing is None


@pytest.mark.asyncio
async def test_broken_file_does_not_crash_the_server(client: LanguageClient, tmp_path: Path) -> None:
    broken = BUGGY.replace("tape = wp.Tape()", "tape = wp.Tape(")
    uri = await open_file(client, tmp_path / "fit.py", broken)
    (diag,) = diagnostics(client, uri)
    assert diag.severity == types.DiagnosticSeverity.Error
    assert "cannot check" in diag.message
    assert diag.range.start.line in (BUG_LINE + 1, BUG_LINE + 2)
    # no fixes, but asking does not fail
    assert [a.title for a in await code_actions(client, uri, [diag])] == []
    # a quick series of edits: the debounced lint publishes the last version, which is valid again
    await change(client, uri, 2, broken + "x = (\n")
    await change(client, uri, 3, BUGGY)
    assert [d.code for d in diagnostics(client, uri)] == ["WF201"]


@pytest.mark.asyncio
async def test_closing_clears_diagnostics(client: LanguageClient, tmp_path: Path) -> None:
    uri = await open_file(client, tmp_path / "fit.py", BUGGY)
    assert diagnostics(client, uri)
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri))
    )
    await until(lambda: diagnostics(client, uri) == [], "cleared diagnostics")


KERNELS = """import warp as wp


@wp.kernel
def damp(v: wp.array(dtype=wp.vec3), k: wp.array(dtype=float)):
    i = wp.tid()
    v[i] *= k[0]
"""
LAUNCH = """import warp as wp

from kernels import damp

v = wp.ones(8, dtype=wp.vec3, requires_grad=True)
k = wp.full(1, 0.9, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(damp, dim=8, inputs=[v, k])
"""


@pytest.mark.asyncio
async def test_fix_edit_covers_every_file_the_codemod_touches(client: LanguageClient, tmp_path: Path) -> None:
    # Only the kernel's module is open; its launch site lives in a neighbour saved on disk.
    (tmp_path / "main.py").write_text(LAUNCH)
    uri = await open_file(client, tmp_path / "kernels.py", KERNELS)
    (diag,) = diagnostics(client, uri)
    assert diag.code == "WF401"
    actions = await code_actions(client, uri, [diag], only=[types.CodeActionKind.QuickFix])
    (fix,) = [a for a in await resolved_all(client, actions) if a.title.startswith("WF401:")]
    main_uri = (tmp_path / "main.py").as_uri()
    assert set(fix.edit.changes) == {uri, main_uri}
    kernels = apply_edits(KERNELS, fix.edit.changes[uri])
    launch = apply_edits(LAUNCH, fix.edit.changes[main_uri])
    assert "v_out: wp.array(dtype=wp.vec3)" in kernels
    assert "inputs=[v, k], outputs=[v_out]" in launch and "v = v_out" in launch
    result = check_sources({str(tmp_path / "kernels.py"): kernels, str(tmp_path / "main.py"): launch})
    assert (result.findings, result.errors) == ([], [])


@pytest.mark.asyncio
async def test_pyproject_per_file_ignores_apply(client: LanguageClient, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.warpfix.per-file-ignores]\n"experiments/*.py" = ["WF201"]\n'
    )
    (tmp_path / "experiments").mkdir()
    ignored = await open_file(client, tmp_path / "experiments" / "fit.py", BUGGY)
    checked = await open_file(client, tmp_path / "fit.py", BUGGY)
    assert diagnostics(client, ignored) == []
    assert [d.code for d in diagnostics(client, checked)] == ["WF201"]


@pytest_lsp.fixture(config=SERVER)
async def client_ignoring_wf2(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=pytest_lsp.client_capabilities("neovim"),
            initialization_options={"ignore": ["wf2"]},
        )
    )
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_initialization_options_select_rules(
    client_ignoring_wf2: LanguageClient, tmp_path: Path
) -> None:
    uri = await open_file(client_ignoring_wf2, tmp_path / "fit.py", BUGGY)
    assert diagnostics(client_ignoring_wf2, uri) == []


@pytest.mark.asyncio
async def test_no_fix_from_a_stale_diagnostic(client: LanguageClient, tmp_path: Path) -> None:
    uri = await open_file(client, tmp_path / "fit.py", BUGGY)
    (stale,) = diagnostics(client, uri)
    # The edit reaches the server before the request; the diagnostic's edits were made for version 1.
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="# moved\n" + BUGGY)],
        )
    )
    titles = [a.title for a in await code_actions(client, uri, [stale], only=[types.CodeActionKind.QuickFix])]
    assert titles == ["Disable WF201 for this line"]


@pytest.mark.asyncio
async def test_saving_checks_again(client: LanguageClient, tmp_path: Path) -> None:
    uri = await open_file(client, tmp_path / "fit.py", BUGGY)
    client.diagnostics.pop(uri)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri))
    )
    await until(lambda: diagnostics(client, uri) is not None, "diagnostics after save")
    assert [d.code for d in diagnostics(client, uri)] == ["WF201"]


@pytest.mark.asyncio
async def test_resolving_a_fix_of_a_changed_document_gives_no_edit(client: LanguageClient, tmp_path: Path) -> None:
    uri = await open_file(client, tmp_path / "fit.py", BUGGY)
    (diag,) = diagnostics(client, uri)
    actions = await code_actions(client, uri, [diag], only=[types.CodeActionKind.QuickFix])
    (fix,) = [a for a in actions if a.title.startswith("WF201:")]
    await change(client, uri, 2, "# moved\n" + BUGGY)
    stale = await resolved(client, fix)
    assert stale.edit is None, "an edit for version 1 would land one line off in version 2"


NO_RESOLVE = types.ClientCapabilities(
    text_document=types.TextDocumentClientCapabilities(
        code_action=types.CodeActionClientCapabilities(
            code_action_literal_support=types.ClientCodeActionLiteralOptions(
                code_action_kind=types.ClientCodeActionKindOptions(value_set=[types.CodeActionKind.QuickFix])
            )
        )
    )
)


@pytest_lsp.fixture(config=SERVER)
async def client_without_resolve(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(capabilities=NO_RESOLVE))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_a_client_that_cannot_resolve_gets_the_edit_with_the_action(
    client_without_resolve: LanguageClient, tmp_path: Path
) -> None:
    uri = await open_file(client_without_resolve, tmp_path / "fit.py", BUGGY)
    (diag,) = diagnostics(client_without_resolve, uri)
    actions = await code_actions(client_without_resolve, uri, [diag], only=[types.CodeActionKind.QuickFix])
    (fix,) = [a for a in actions if a.title.startswith("WF201:")]
    fixed = apply_edits(BUGGY, fix.edit.changes[uri])
    assert "y = wp.zeros(n, dtype=float, requires_grad=True)" in fixed


@pytest.mark.asyncio
async def test_a_quick_fix_the_codemod_refuses_says_why(client: LanguageClient, tmp_path: Path) -> None:
    """WF106 in a kernel whose launch argument's gradient the optimizer reads: the quick fix is offered
    (the detector cannot tell), the codemod refuses when the user picks it, and the user is told why
    instead of nothing happening. (Under the golden case's graph capture the detector can tell: no fix.)"""
    text = (ROOT / "golden" / "WF106-graph-captured" / "buggy" / "main.py").read_text()
    text = text.replace("with wp.ScopedCapture() as graph:", "if True:").replace("self.graph = graph.graph",
                                                                                "self.graph = None")
    uri = await open_file(client, tmp_path / "main.py", text)
    (diag,) = [d for d in diagnostics(client, uri) if d.code == "WF106"]
    actions = await code_actions(client, uri, [diag], only=[types.CodeActionKind.QuickFix])
    (fix,) = [a for a in actions if a.title.startswith("WF106:")]
    client.messages.clear()
    fix = await resolved(client, fix)
    assert fix.edit is None
    await until(lambda: bool(client.messages), "the reason the fix makes no edit")
    (shown,) = client.messages
    assert shown.type == types.MessageType.Warning
    assert shown.message.startswith("warpfix: no automatic fix for WF106: ")
    assert "the program reads self.v0.grad" in shown.message
