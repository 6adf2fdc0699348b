"""Jupyter notebooks through the real command: a golden buggy program split into cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import warpfix

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "WF401-inplace-mul"
MAGICS = ["%matplotlib inline\n", "!echo hello\n", "n_files = !ls | wc -l"]


def _notebook(code: str) -> tuple[str, list[str]]:
    """nbformat 4 JSON (as Jupyter writes it: indent 1, a list of lines per source): a markdown
    cell, the program in code cells split at top-level blank lines, a cell of IPython magics
    second, a `%%time` cell, and outputs on the first code cell. Also each code cell's text."""
    chunks = code.split("\n\n\n")
    pieces = [c + "\n\n\n" for c in chunks[:-1]] + [chunks[-1]]
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Drag calibration\n", "From a golden case."]}]
    for i, piece in enumerate(pieces):
        lines = piece.splitlines(keepends=True)
        lines[-1] = lines[-1].rstrip("\n") if i == len(pieces) - 1 else lines[-1]
        outputs = [{"name": "stdout", "output_type": "stream", "text": ["loaded\n"]}] if i == 0 else []
        cells.append({"cell_type": "code", "execution_count": i + 1, "metadata": {"tags": []},
                      "outputs": outputs, "source": lines})
    cells.insert(2, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": MAGICS})
    cells.append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                  "source": ["%%time\n", "main()  ← not Python for the analysis"]})
    nb = {"cells": cells,
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                       "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n", pieces


@pytest.fixture
def notebook(tmp_path: Path) -> tuple[Path, list[str]]:
    text, pieces = _notebook((GOLDEN / "buggy" / "main.py").read_text())
    path = tmp_path / "drag.ipynb"
    path.write_text(text, encoding="utf-8")
    return path, pieces


def _bug_cell(pieces: list[str]) -> tuple[int, int]:
    """(cell number, line in cell) of the golden WF401 line `v[i] *= k[0]`."""
    for i, piece in enumerate(pieces):
        lines = piece.splitlines()
        if "    v[i] *= k[0]" in lines:
            return i + 3 if i >= 1 else i + 2, lines.index("    v[i] *= k[0]") + 1  # the magic cell is third
    raise AssertionError("no bug line")


def _nested(source: list[str]) -> str:
    """A cell's "source" list as it appears in a notebook written with indent 1."""
    return json.dumps(source, indent=1, ensure_ascii=False).replace("\n", "\n   ")


def _valid_nbformat4(data: dict) -> None:
    assert data["nbformat"] == 4 and isinstance(data["nbformat_minor"], int) and isinstance(data["metadata"], dict)
    for cell in data["cells"]:
        assert cell["cell_type"] in ("code", "markdown", "raw") and isinstance(cell["metadata"], dict)
        assert isinstance(cell["source"], list) and all(isinstance(s, str) for s in cell["source"])
        if cell["cell_type"] == "code":
            assert isinstance(cell["outputs"], list) and "execution_count" in cell


def test_check_points_at_the_cell_and_line(notebook: tuple[Path, list[str]]) -> None:
    path, pieces = notebook
    cell, line = _bug_cell(pieces)
    proc = warpfix("check", "--no-cache", path.name, cwd=path.parent)
    assert proc.returncode == 1, proc.stderr
    assert f"drag.ipynb:cell {cell}:{line}:5: WF401" in proc.stdout
    assert f"{line} |     v[i] *= k[0]" in proc.stdout  # the snippet shows the cell's own line number
    data = json.loads(warpfix("check", "--no-cache", "--format", "json", path.name, cwd=path.parent).stdout)
    (finding,) = data["findings"]
    assert (finding["rule"], finding["path"], finding["cell"], finding["line"]) == ("WF401", "drag.ipynb", cell, line)
    github = warpfix("check", "--no-cache", "--format", "github", path.name, cwd=path.parent).stdout
    assert f"file=drag.ipynb,line={line}," in github and f"::cell {cell}: " in github
    sarif = json.loads(warpfix("check", "--no-cache", "--format", "sarif", path.name, cwd=path.parent).stdout)
    (result,) = sarif["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "drag.ipynb" and location["region"]["startLine"] == line
    assert result["properties"]["cell"] == cell and "fixes" not in result


def test_apply_fixes_the_cells_and_keeps_every_other_byte(notebook: tuple[Path, list[str]]) -> None:
    path, pieces = notebook
    before_text = path.read_text(encoding="utf-8")
    before = json.loads(before_text)
    proc = warpfix("apply", "--no-cache", path.name, cwd=path.parent)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    after_text = path.read_text(encoding="utf-8")
    after = json.loads(after_text)
    _valid_nbformat4(after)
    # the code of the fixed notebook is the golden fixed program
    code = "".join("".join(c["source"]) for c in after["cells"][1:] if c["cell_type"] == "code"
                   and not c["source"][0].startswith(("%", "!")))
    assert code + "\n" == (GOLDEN / "fixed" / "main.py").read_text()  # the last cell has no final newline
    changed = [i for i, (a, b) in enumerate(zip(before["cells"], after["cells"], strict=True)) if a != b]
    assert changed and all(before["cells"][i]["source"] != after["cells"][i]["source"] for i in changed)
    assert all({k: v for k, v in before["cells"][i].items() if k != "source"}
               == {k: v for k, v in after["cells"][i].items() if k != "source"} for i in changed)
    # byte for byte: putting the old "source" lists back into the new file gives the old file
    restored = after_text
    for i in changed:
        new_src, old_src = _nested(after["cells"][i]["source"]), _nested(before["cells"][i]["source"])
        assert restored.count(new_src) == 1
        restored = restored.replace(new_src, old_src)
    assert restored == before_text
    assert after["cells"][2]["source"] == MAGICS and after["cells"][-1] == before["cells"][-1]
    assert warpfix("apply", "--no-cache", path.name, cwd=path.parent).returncode == 0
    assert path.read_text(encoding="utf-8") == after_text


def test_apply_on_stdin_prints_the_fixed_notebook(notebook: tuple[Path, list[str]]) -> None:
    path, _ = notebook
    text = path.read_text(encoding="utf-8")
    piped = warpfix("apply", "--no-cache", "--stdin-filename", path.name, "-", cwd=path.parent, stdin=text)
    assert piped.returncode == 1 and path.read_text(encoding="utf-8") == text
    warpfix("apply", "--no-cache", path.name, cwd=path.parent)
    assert piped.stdout == path.read_text(encoding="utf-8")


def test_not_a_notebook_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "bad.ipynb").write_text("{not json")
    proc = warpfix("check", "--no-cache", "bad.ipynb", cwd=tmp_path)
    assert proc.returncode == 2 and "bad.ipynb: not a valid notebook" in proc.stderr
    assert proc.stderr.count("\n") == 1
