"""Jupyter notebooks (``.ipynb``, nbformat 4) as one Python program.

The code cells, in cell order, become one Python text in which each cell starts with a marker
comment line ``# warpfix-notebook-cell: N`` (N: the cell's 1-based position among all the
notebook's cells, markdown included, as ruff counts them). IPython lines that are not Python
(``%magic``, ``!shell``, ``x = !cmd``, and every line of a ``%%cell_magic`` cell) are replaced by
``pass  # warpfix-magic: K`` at their indentation, so the text parses and keeps its line numbers.
Positions in that text map back to ``cell N, line L`` with :func:`cell_position`.

A fixed text is mapped back with :func:`splice`: only the cells whose code changed are
rewritten, by replacing the bytes of their ``"source"`` value in the original JSON (in the
notebook's own layout: a list of lines or a string, its indentation, its escaping); every other
byte of the file stays as it was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from json.decoder import JSONDecoder, scanstring

SUFFIX = ".ipynb"
MARKER = "# warpfix-notebook-cell: "
_MARKER_LINE = re.compile(r"^# warpfix-notebook-cell: (\d+)$")
_PLACEHOLDER = re.compile(r"^(\s*)pass  # warpfix-magic: (\d+)$")
_MAGIC = re.compile(r"^\s*(?:[%!]|[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[%!])")
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = JSONDecoder()


class NotebookError(Exception):
    """A notebook that cannot be read or written back; the message is one line."""


@dataclass(frozen=True)
class Cell:
    number: int  # 1-based position among all cells
    code: str  # the cell's source text
    start: int  # offsets of its "source" value in the file's text
    end: int


@dataclass(frozen=True)
class Notebook:
    raw: str
    cells: tuple[Cell, ...]  # the code cells

    def magic_lines(self, cell: Cell) -> list[str]:
        return [line for line, magic in _classify(cell.code) if magic]


def is_notebook(path: str) -> bool:
    return path.endswith(SUFFIX)


# ------------------------------------------------------------------------------ reading
def parse(raw: str) -> Notebook:
    """The code cells of a notebook's JSON text; :class:`NotebookError` when it is not one."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise NotebookError(f"not a valid notebook (JSON error: {exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("not a nbformat 4 notebook (no `cells` list)")
    if not _is_python(data.get("metadata", {})):
        return Notebook(raw, ())
    cells: list[Cell] = []
    top = _skip(raw, 0)
    for key, start, _ in _members(raw, top):
        if key != "cells":
            continue
        for number, (cell_start, _) in enumerate(_elements(raw, start), 1):
            cell = data["cells"][number - 1]
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            span = next(((s, e) for k, s, e in _members(raw, cell_start) if k == "source"), None)
            if span is None:
                continue
            source = cell["source"]
            code = "".join(source) if isinstance(source, list) else source
            if not isinstance(code, str):
                raise NotebookError(f"cell {number}: `source` is neither a string nor a list of strings")
            cells.append(Cell(number, code, *span))
    return Notebook(raw, tuple(cells))


def _is_python(metadata: object) -> bool:
    if not isinstance(metadata, dict):
        return True
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        value = metadata.get(key)
        if isinstance(value, dict) and isinstance(value.get(field), str):
            return value[field].lower() == "python"
    return True


def _classify(code: str) -> list[tuple[str, bool]]:
    """Each line of a cell (with its newline) and whether it is IPython rather than Python."""
    lines = code.splitlines(keepends=True)
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith("%%"):
        return [(line, True) for line in lines]
    out: list[tuple[str, bool]] = []
    continued = False
    for line in lines:
        magic = continued or bool(_MAGIC.match(line))
        continued = magic and line.rstrip("\r\n").endswith("\\")
        out.append((line, magic))
    return out


def to_python(nb: Notebook) -> str:
    """The code cells as one Python text (see the module docstring)."""
    parts: list[str] = []
    for cell in nb.cells:
        parts.append(f"{MARKER}{cell.number}\n")
        k = 0
        for line, magic in _classify(cell.code):
            if magic:
                indent = line[: len(line) - len(line.lstrip())]
                line = f"{indent}pass  # warpfix-magic: {k}\n"
                k += 1
            parts.append(line if line.endswith("\n") else line + "\n")
    return "".join(parts)


def cell_position(text: str, line: int) -> tuple[int, int] | None:
    """``(cell, line in cell)`` of 1-based ``line`` of a :func:`to_python` text (None before any cell)."""
    lines = text.splitlines()
    for i in range(min(line, len(lines)) - 1, -1, -1):
        m = _MARKER_LINE.match(lines[i])
        if m:
            return int(m.group(1)), max(line - (i + 1), 1)
    return None


# ------------------------------------------------------------------------------ writing back
def _split(text: str) -> list[tuple[int, str]]:
    """(cell number, code) per marker of a :func:`to_python` text; text before the first marker
    joins the first cell."""
    out: list[tuple[int, list[str]]] = []
    head: list[str] = []
    for line in text.splitlines(keepends=True):
        m = _MARKER_LINE.match(line.rstrip("\r\n"))
        if m:
            out.append((int(m.group(1)), head if not out else []))
            head = []
        elif out:
            out[-1][1].append(line)
        else:
            head.append(line)
    if head and not out:
        raise NotebookError("the fixed code lost the notebook's cell markers")
    return [(n, "".join(lines)) for n, lines in out]


def _restore(nb: Notebook, cell: Cell, code: str) -> str:
    magics = nb.magic_lines(cell)
    used: set[int] = set()
    lines = []
    for line in code.splitlines(keepends=True):
        m = _PLACEHOLDER.match(line.rstrip("\r\n"))
        if m:
            k = int(m.group(2))
            if k >= len(magics) or k in used:
                raise NotebookError(f"cell {cell.number}: the fix moved an IPython magic line")
            used.add(k)
            line = magics[k]
        lines.append(line)
    if len(used) != len(magics):
        raise NotebookError(f"cell {cell.number}: the fix removed an IPython magic line")
    out = "".join(lines)
    if not cell.code.endswith("\n") and out.endswith("\n"):
        out = out[:-1]
    return out


def splice(nb: Notebook, fixed: str) -> str:
    """The notebook's JSON text with the code of ``fixed`` (a :func:`to_python` text): only the
    ``"source"`` values of the cells whose code changed are replaced."""
    new = _split(fixed)
    if [n for n, _ in new] != [c.number for c in nb.cells]:
        raise NotebookError("the fix moved code across notebook cells")
    before = dict(_split(to_python(nb)))
    out: list[str] = []
    pos = 0
    for cell, (_, code) in zip(nb.cells, new, strict=True):
        if code == before[cell.number]:
            continue
        out.append(nb.raw[pos:cell.start])
        out.append(_source_json(nb.raw, nb.raw[cell.start:cell.end], _restore(nb, cell, code)))
        pos = cell.end
    out.append(nb.raw[pos:])
    return "".join(out)


def _source_json(raw: str, old: str, code: str) -> str:
    """``code`` serialised in the layout of the ``"source"`` value ``old``."""
    ascii_only = raw.isascii() and "\\u" in raw
    if not old.startswith("["):
        return json.dumps(code, ensure_ascii=ascii_only)
    lines = code.splitlines(keepends=True)
    items = [json.dumps(line, ensure_ascii=ascii_only) for line in lines]
    inner = old[1:-1]
    if "\n" not in inner or not inner.strip():
        return "[" + ", ".join(items) + "]"
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()):]
    return "[" + lead + ("," + lead).join(items) + trail + "]"


# ------------------------------------------------------------------------------ JSON offsets
def _skip(s: str, i: int) -> int:
    return _WS.match(s, i).end()  # type: ignore[union-attr]


def _value_end(s: str, i: int) -> int:
    try:
        return _DECODER.raw_decode(s, i)[1]
    except ValueError as exc:
        raise NotebookError(f"not a valid notebook (JSON error: {exc})") from exc


def _members(s: str, i: int) -> Iterator[tuple[str, int, int]]:
    """(key, value start, value end) of the JSON object at offset ``i``."""
    if s[i] != "{":
        return
    i = _skip(s, i + 1)
    while i < len(s) and s[i] == '"':
        key, i = scanstring(s, i + 1)
        i = _skip(s, _skip(s, i) + 1)  # past ':'
        end = _value_end(s, i)
        yield key, i, end
        i = _skip(s, end)
        if s[i] != ",":
            return
        i = _skip(s, i + 1)


def _elements(s: str, i: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each element of the JSON array at offset ``i``."""
    if s[i] != "[":
        return
    i = _skip(s, i + 1)
    while i < len(s) and s[i] != "]":
        end = _value_end(s, i)
        yield i, end
        i = _skip(s, end)
        if s[i] != ",":
            return
        i = _skip(s, i + 1)
