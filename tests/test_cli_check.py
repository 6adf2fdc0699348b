"""`warpfix check` end to end: exit codes, output keys, bad input, suppression, config, cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._cli import BUG_LINE, BUGGY
from warpfix.cli import main


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(BUGGY)
    return tmp_path


def run_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["check", "--no-cache", "--format", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def test_json_keys_exit_code_and_relative_paths(project: Path, capsys) -> None:
    code, data = run_json(capsys, "train.py")
    assert code == 1
    assert data["version"] == 1 and data["warp_version"].count(".") == 2
    f = next(f for f in data["findings"] if f["rule"] == "WF401")
    assert f["path"] == "train.py" and f["line"] == BUG_LINE and f["column"] == 5
    for key in ("name", "severity", "end_line", "end_column", "message", "fix"):
        assert key in f
    assert set(f["fix"]) >= {"safety", "description"}


def test_clean_file_exits_zero(project: Path, capsys) -> None:
    (project / "train.py").write_text("import warp as wp\nprint(wp.__version__)\n")
    code, data = run_json(capsys, ".")
    assert code == 0 and data["findings"] == []


def test_suppression_comment(project: Path, capsys) -> None:
    text = BUGGY.replace("x[i] *= s", "x[i] *= s  # warpfix: ignore[WF401]")
    (project / "train.py").write_text(text)
    _, data = run_json(capsys, "train.py")
    assert not [f for f in data["findings"] if f["rule"] == "WF401"]
    (project / "train.py").write_text(BUGGY.replace("x[i] *= s", "x[i] *= s  # warpfix: ignore"))
    _, data = run_json(capsys, "train.py")
    assert not [f for f in data["findings"] if f["line"] == BUG_LINE]


def test_select_ignore_and_config(project: Path, capsys) -> None:
    code, data = run_json(capsys, "--ignore", "WF4", "train.py")
    assert not [f for f in data["findings"] if f["rule"].startswith("WF4")]
    (project / "pyproject.toml").write_text('[tool.warpfix]\nignore = ["WF401"]\n')
    _, data = run_json(capsys, "train.py")
    assert not [f for f in data["findings"] if f["rule"] == "WF401"]
    assert main(["check", "--select", "WF999", "train.py"]) == 2


def test_bad_inputs_one_line_each_rest_checked(project: Path, capsys) -> None:
    (project / "broken.py").write_text("import warp as wp\ndef f(:\n")
    (project / "latin1.py").write_bytes("import warp as wp\n# caf\xe9\n".encode("latin-1"))
    (project / "blob.py").write_bytes(b"import warp\x00\x01")
    code = main(["check", "--no-cache", "."])
    out, err = capsys.readouterr()
    assert code == 2  # an input error wins over the good file's findings (ruff's exit codes)
    assert "train.py:7:5: WF401" in out and "broken.py" not in out  # report on stdout, errors on stderr
    text = out + err
    assert "broken.py" in text and "syntax error" in text
    assert "latin1.py" in text and "UTF-8" in text
    assert "blob.py" in text and "binary" in text
    assert "Traceback" not in text
    assert main(["check", "--no-cache", "missing.py"]) == 2
    assert "missing.py" in "".join(capsys.readouterr())


def test_only_bad_files_exit_two(project: Path, capsys) -> None:
    (project / "train.py").write_text("import warp as wp\nx = (\n")
    assert main(["check", "--no-cache", "."]) == 2


def test_skips_virtualenvs_and_hidden_folders(project: Path, capsys) -> None:
    for folder in (".venv/lib", "build", ".hidden", "node_modules"):
        (project / folder).mkdir(parents=True)
        (project / folder / "bug.py").write_text(BUGGY)
    (project / "env").mkdir()
    (project / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (project / "env" / "bug.py").write_text(BUGGY)
    _, data = run_json(capsys, ".")
    assert {f["path"] for f in data["findings"]} == {"train.py"}


def test_cache_hit_gives_same_findings(project: Path, capsys) -> None:
    assert main(["check", "--format", "json", "train.py"]) == 1
    first = json.loads(capsys.readouterr().out)
    assert (project / ".warpfix_cache").is_dir()
    assert main(["check", "--format", "json", "train.py"]) == 1
    second = json.loads(capsys.readouterr().out)
    assert first["findings"] == second["findings"]
    (project / "train.py").write_text(BUGGY.replace("x[i] *= s", "x[i] = s"))
    assert main(["check", "--format", "json", "train.py"]) in (0, 1)
    third = json.loads(capsys.readouterr().out)
    assert not [f for f in third["findings"] if f["rule"] == "WF401"]


def test_rules_command_prints_docs(capsys) -> None:
    assert main(["rules"]) == 0
    listing = capsys.readouterr().out
    assert "WF101" in listing and "WF803" in listing
    assert main(["rules", "WF401"]) == 0
    doc = capsys.readouterr().out
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
        assert heading in doc
    assert main(["rules", "WF999"]) == 2


def test_console_script_runs(project: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "warpfix", "check", "--no-cache", "train.py"],
                          capture_output=True, text=True, cwd=project, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 1
    assert f"train.py:{BUG_LINE}:5" in proc.stdout and "WF401" in proc.stdout


def test_readme_lists_every_rule() -> None:
    from warpfix.rules import all_rules

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    missing = [r.id for r in all_rules() if f"| {r.id} | {r.name} |" not in readme]
    assert not missing, f"README.md rule table lacks {missing}"


def test_readme_stands_alone() -> None:
    """No link out of the repository; the catalog it names ships in docs/ and covers every ID."""
    import re

    from warpfix.rules import all_rules
    from warpfix.runtime_rules import RUNTIME_IDS

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    assert "../" not in readme and "shared/" not in readme
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        assert target.startswith("http") or (root / target).exists(), target
    catalog = (root / "docs" / "RULES.md").read_text()
    missing = [i for i in [r.id for r in all_rules()] + list(RUNTIME_IDS) if i not in catalog]
    assert not missing, f"docs/RULES.md lacks {missing}"
