"""The language server's edit helpers: suppression comments and line edits."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.workspace import PositionCodec

from warpfix.config import Config
from warpfix.lsp import lint as lsp
from warpfix.lsp import server
from warpfix.lsp.edits import ignore_comment_edit, text_edits
from warpfix.report import fixedits

WF702 = """import warp as wp


@wp.kernel
def spring(p: wp.array(dtype=wp.vec3), e: wp.array(dtype=float)):
    i = wp.tid()
    d = p[i + 1] - p[i]
    l = wp.sqrt(wp.dot(d, d))
    e[i] = (l - 1.0) * (l - 1.0)


p = wp.zeros(5, dtype=wp.vec3, requires_grad=True)
e = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(spring, dim=4, inputs=[p], outputs=[e])
"""


def _apply(text: str, edit: types.TextEdit) -> str:
    lines = text.splitlines(keepends=True)
    start = sum(map(len, lines[: edit.range.start.line])) + edit.range.start.character
    end = sum(map(len, lines[: edit.range.end.line])) + edit.range.end.character
    return text[:start] + edit.new_text + text[end:]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("y = wp.zeros(n)", "y = wp.zeros(n)  # warpfix: ignore[WF201]"),
        ("y = wp.zeros(n)   ", "y = wp.zeros(n)  # warpfix: ignore[WF201]"),
        ("y = wp.zeros(n)  # a note", "y = wp.zeros(n)  # a note  # warpfix: ignore[WF201]"),
        ("y = wp.zeros(n)  # warpfix: ignore[WF101]", "y = wp.zeros(n)  # warpfix: ignore[WF101, WF201]"),
        ("y = f('#')  # warpfix: ignore[ wf101 ]", "y = f('#')  # warpfix: ignore[wf101, WF201]"),
    ],
)
def test_ignore_comment_is_added_or_extended(line: str, expected: str) -> None:
    text = f"import warp as wp\n{line}\nz = 1\n"
    edit = ignore_comment_edit(text, 1, "WF201")
    assert edit is not None
    assert _apply(text, edit) == f"import warp as wp\n{expected}\nz = 1\n"


@pytest.mark.parametrize(
    "text",
    [
        "y = 1  # warpfix: ignore\n",  # already suppresses everything
        "y = 1  # warpfix: ignore[WF201]\n",  # already suppressed
        's = """first\nsecond"""\n',  # the line ends inside a string
        "y = 1 + \\\n    2\n",  # a backslash continuation
    ],
)
def test_no_ignore_comment_where_it_cannot_go(text: str) -> None:
    assert ignore_comment_edit(text, 0, "WF201") is None


def test_ignore_comment_on_a_file_that_does_not_tokenize() -> None:
    text = "y = f(1\nz = (\n"
    edit = ignore_comment_edit(text, 0, "WF201")
    assert edit is not None
    assert _apply(text, edit).splitlines()[0] == "y = f(1  # warpfix: ignore[WF201]"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb", "a\nB"),  # no final newline: the edit ends at the end of the text
        ("a\nb", "a\nb\nc\n"),
        ("a\nb\nc\n", "c\n"),
        ("x = '数'\ny\n", "x = '数'\nz\n"),
    ],
)
def test_text_edits_rebuild_the_new_text(old: str, new: str) -> None:
    edits = text_edits(old, new, PositionCodec())
    out = old
    for edit in reversed(edits):
        out = _apply(out, edit)
    assert out == new
    lines = old.splitlines()
    for edit in edits:
        assert edit.range.end.line < len(lines) or edit.range.end == types.Position(
            line=len(lines), character=0
        )


def test_a_lint_runs_no_codemod(monkeypatch, tmp_path) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("a lint must not compute fixes")

    monkeypatch.setattr(server, "fix_outcome", broken)
    monkeypatch.setattr(fixedits, "fix_changes", broken)
    monkeypatch.setattr(fixedits, "fix_outcome", broken)
    path = str(tmp_path / "fit.py")
    uri = (tmp_path / "fit.py").as_uri()
    snap = lsp.Snapshot({path: WF702}, {uri: 3}, {path: uri}, Config(), PositionCodec())
    result = lsp.lint_snapshot(snap)
    checked, (diagnostic,) = result.documents[uri]
    assert diagnostic.code == "WF702"
    assert "edits" not in diagnostic.data
    assert diagnostic.data["fix"] and diagnostic.data["span"] == lsp.span_key(checked.findings[0])
    assert diagnostic.data["version"] == 3
    assert checked.version == 3


def test_diagnostic_edits_use_the_clients_position_units(tmp_path) -> None:
    path = str(tmp_path / "fit.py")
    uri = (tmp_path / "fit.py").as_uri()
    # U+1D714 is one code point (Python's column unit) but two UTF-16 units (the LSP default)
    text = WF702.replace("    l = wp.sqrt(", "    \U0001d714 = 1.0; l = wp.sqrt(")
    snap = lsp.Snapshot({path: text}, {uri: 1}, {path: uri}, Config(), PositionCodec())
    (diagnostic,) = lsp.lint_snapshot(snap).documents[uri][1]
    line = text.splitlines()[diagnostic.range.start.line]
    assert (
        line.encode("utf-16-le")[2 * diagnostic.range.start.character :]
        .decode("utf-16-le")
        .startswith("wp.sqrt(")
    )
    assert "edits" not in diagnostic.data
