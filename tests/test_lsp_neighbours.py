"""Which neighbours of an open document the language server checks with it, what a change
re-reads and re-analyses, and when a change is linted (counted, not timed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pygls.workspace import PositionCodec

import warpfix.engine
import warpfix.reading
from warpfix.config import Config
from warpfix.engine import ParseCache, check_sources
from warpfix.lsp import lint as lsp
from warpfix.lsp.server import DEBOUNCE_SECONDS, WarpfixServer

KERNELS = """import warp as wp


@wp.kernel
def damp(v: wp.array(dtype=wp.vec3), k: wp.array(dtype=float)):
    i = wp.tid()
    v[i] *= k[0]
"""
LAUNCH = """import warp as wp

from kernels import damp
from helpers import make_k

v = wp.ones(8, dtype=wp.vec3, requires_grad=True)
k = make_k()
tape = wp.Tape()
with tape:
    wp.launch(damp, dim=8, inputs=[v, k])
"""
HELPERS = """import warp as wp


def make_k():
    return wp.full(1, 0.9, dtype=float, requires_grad=True)
"""
UNRELATED = """import warp as wp


@wp.kernel
def other_{k}(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] * 2.0


def run_{k}():
    a = wp.zeros(4, dtype=float, requires_grad=True)
    with wp.Tape():
        wp.launch(other_{k}, dim=4, inputs=[a])
"""


def _folder(tmp_path: Path) -> Path:
    for name, text in {"kernels.py": KERNELS, "main.py": LAUNCH, "helpers.py": HELPERS}.items():
        (tmp_path / name).write_text(text)
    for k in range(3):
        (tmp_path / f"unrelated_{k}.py").write_text(UNRELATED.format(k=k))
    return tmp_path / "kernels.py"


def _snapshot(path: Path, text: str, version: int, cache: ParseCache) -> lsp.Snapshot:
    uri = path.as_uri()
    return lsp.Snapshot({str(path): text}, {uri: version}, {str(path): uri}, Config(), PositionCodec(),
                         parse_cache=cache)


@pytest.fixture
def analysed(monkeypatch) -> list[list[str]]:
    """The files of each project the model is built for, and (last entry) every file parsed."""
    built: list[list[str]] = []
    parsed: list[str] = []
    real_build, real_parse = warpfix.engine.build_project, warpfix.engine.parse_file

    def build(files, *args, **kwargs):
        built.append(sorted(Path(p).name for p in files))
        return real_build(files, *args, **kwargs)

    def parse(path, text):
        parsed.append(Path(path).name)
        return real_parse(path, text)

    monkeypatch.setattr(warpfix.engine, "build_project", build)
    monkeypatch.setattr(warpfix.engine, "parse_file", parse)
    monkeypatch.setattr(warpfix.reading, "parse_file", parse)  # the parse cache's
    monkeypatch.setattr(lsp, "parse_file", parse)
    built.append(parsed)
    return built


def test_only_neighbours_joined_by_imports_are_checked(tmp_path: Path, analysed: list[list[str]]) -> None:
    doc = _folder(tmp_path)
    lsp.lint_snapshot(_snapshot(doc, KERNELS, 1, ParseCache()))
    parsed, *built = analysed
    # main.py imports the document, helpers.py is imported by main.py; the unrelated files are not
    assert built == [["helpers.py", "kernels.py", "main.py"]]
    assert set(parsed) >= {"unrelated_0.py", "kernels.py", "main.py", "helpers.py"}


def test_a_second_change_parses_only_the_changed_file(tmp_path: Path, analysed: list[list[str]]) -> None:
    doc = _folder(tmp_path)
    cache = ParseCache()
    lsp.lint_snapshot(_snapshot(doc, KERNELS, 1, cache))
    parsed = analysed[0]
    first = len(parsed)
    lsp.lint_snapshot(_snapshot(doc, KERNELS + "EDIT = 1\n", 2, cache))
    assert parsed[first:] == ["kernels.py"]
    lsp.lint_snapshot(_snapshot(doc, KERNELS + "EDIT = 2\n", 3, cache))
    assert parsed[first + 1:] == ["kernels.py"]


def test_diagnostics_are_those_of_the_whole_folder(tmp_path: Path) -> None:
    doc = _folder(tmp_path)
    uri = doc.as_uri()
    pruned = lsp.lint_snapshot(_snapshot(doc, KERNELS, 1, ParseCache())).documents[uri][0].findings
    whole = check_sources({str(p): p.read_text() for p in sorted(tmp_path.glob("*.py"))}, follow_imports=True)
    assert [f.rule for f in pruned] == ["WF401"]
    assert pruned == [f for f in whole.findings if f.path == str(doc)]


def test_a_package_init_is_joined_by_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    texts = {str(pkg / "__init__.py"): "import warp as wp\n", str(pkg / "sim.py"): "from . import step\n",
             str(pkg / "solo.py"): "import numpy\n"}
    docs = {str(pkg / "__init__.py"): texts[str(pkg / "__init__.py")]}
    others = {p: t for p, t in texts.items() if p not in docs}
    assert set(lsp.related_neighbours(docs, others, ParseCache().parse)) == {str(pkg / "sim.py")}


UNTAPED = """import warp as wp


@wp.kernel
def invert(m: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.where(m[i] == 0.0, 0.0, 1.0 / m[i])
"""


def test_a_taped_launch_in_an_unrelated_neighbour_still_silences_untaped_kernels(
    tmp_path: Path, analysed: list[list[str]]
) -> None:
    doc = tmp_path / "invert.py"
    doc.write_text(UNTAPED)
    uri = doc.as_uri()
    alone = lsp.lint_snapshot(_snapshot(doc, UNTAPED, 1, ParseCache())).documents[uri][0].findings
    assert alone and all(f.severity.value == "warning" for f in alone)  # no tape anywhere: warned
    (tmp_path / "unrelated_0.py").write_text(UNRELATED.format(k=0))
    whole = check_sources({str(p): p.read_text() for p in sorted(tmp_path.glob("*.py"))}, follow_imports=True)
    assert [f for f in whole.findings if f.path == str(doc)] == []
    cache = ParseCache()
    for version in (2, 3):
        got = lsp.lint_snapshot(_snapshot(doc, UNTAPED + f"EDIT = {version}\n", version, cache))
        assert got.documents[uri][0].findings == []
    # the neighbours' taped launch was found once; the document alone is re-analysed per change
    both = ["invert.py", "unrelated_0.py"]
    assert analysed[1:] == [["invert.py"], both,  # alone, then the whole-folder reference
                            ["invert.py"], ["unrelated_0.py"], ["invert.py"],  # change 1: again with their switch
                            ["invert.py"]]  # change 2: their answer is reused


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The name of every neighbour read from disk."""
    read: list[str] = []
    real = lsp.read_source

    def read_source(path):
        read.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(lsp, "read_source", read_source)
    return read


def test_an_unchanged_neighbour_is_not_read_again(tmp_path: Path, reads: list[str], monkeypatch) -> None:
    monkeypatch.setattr(lsp, "RACY_NS", 0, raising=False)  # the files were just written: no longer racy
    doc = _folder(tmp_path)
    cache = ParseCache()
    first = lsp.lint_snapshot(_snapshot(doc, KERNELS, 1, cache)).documents[doc.as_uri()][0].findings
    assert sorted(reads) == sorted(p.name for p in tmp_path.glob("*.py"))
    reads.clear()
    lsp.lint_snapshot(_snapshot(doc, KERNELS + "EDIT = 1\n", 2, cache))
    assert reads == []
    # main.py saved without its tape (another size): read again, and what it says now counts
    untaped = LAUNCH.replace("tape = wp.Tape()\nwith tape:\n    ", "")
    (tmp_path / "main.py").write_text(untaped)
    got = lsp.lint_snapshot(_snapshot(doc, KERNELS + "EDIT = 2\n", 3, cache)).documents[doc.as_uri()][0].findings
    assert reads == ["main.py"]
    texts = {str(p): p.read_text() for p in sorted(tmp_path.glob("*.py"))}
    whole = check_sources({**texts, str(doc): KERNELS + "EDIT = 2\n"}, follow_imports=True)
    assert got == [f for f in whole.findings if f.path == str(doc)]
    assert got != first


def test_a_neighbour_saved_just_now_is_read_every_time(tmp_path: Path, reads: list[str], monkeypatch) -> None:
    monkeypatch.setattr(lsp, "RACY_NS", 10**15, raising=False)  # every file is "just saved"
    doc = _folder(tmp_path)
    cache = ParseCache()
    lsp.lint_snapshot(_snapshot(doc, KERNELS, 1, cache))
    count = len(reads)
    lsp.lint_snapshot(_snapshot(doc, KERNELS + "EDIT = 1\n", 2, cache))
    assert len(reads) == 2 * count


def test_a_lone_change_is_linted_at_once_and_a_burst_waits(monkeypatch) -> None:
    server = WarpfixServer()
    delays: list[tuple[str, float]] = []
    release = asyncio.Event()

    async def lint_later(uri: str, delay: float) -> None:
        delays.append((uri, delay))
        await release.wait()

    monkeypatch.setattr(server, "_lint_later", lint_later)

    async def edits() -> None:
        server.changed("file:///a.py")  # nothing pending: at once
        await asyncio.sleep(0)
        server.changed("file:///a.py")  # the lint of the first change is still running: debounced
        server.changed("file:///b.py")  # another document, idle: at once
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*server._pending.values())
        server.changed("file:///a.py")  # its lint finished: at once again
        await asyncio.gather(*server._pending.values())

    asyncio.run(edits())
    assert delays == [("file:///a.py", 0), ("file:///a.py", DEBOUNCE_SECONDS), ("file:///b.py", 0),
                      ("file:///a.py", 0)]
