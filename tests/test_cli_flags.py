"""The ruff-style flags of ``check`` and ``apply``, each through the real command (``python -m warpfix``)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _cli import BUG_LINE, BUGGY, env, warpfix

# WF702 (`wp.sqrt(wp.dot(v, v))`, safe fix) next to the WF401 of BUGGY.
TWO_RULES = BUGGY.replace("wp.atomic_add(loss, 0, x[i] * x[i])",
                          "wp.atomic_add(loss, 0, wp.sqrt(wp.dot(wp.vec2(x[i], 1.0), wp.vec2(x[i], 1.0))))")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(BUGGY)
    return tmp_path


def findings(proc: subprocess.CompletedProcess[str]) -> list[tuple[str, str, int]]:
    return sorted((f["rule"], f["path"], f["line"]) for f in json.loads(proc.stdout)["findings"])


def test_exit_codes_and_exit_zero(project: Path) -> None:
    assert warpfix("check", "--no-cache", "train.py", cwd=project).returncode == 1
    assert warpfix("check", "--no-cache", "--exit-zero", "train.py", cwd=project).returncode == 0
    (project / "broken.py").write_text("import warp as wp\ndef f(:\n")
    proc = warpfix("check", "--no-cache", "--exit-zero", ".", cwd=project)
    assert proc.returncode == 2  # an input error is never hidden
    assert "broken.py" in proc.stderr and "broken.py" not in proc.stdout
    assert f"train.py:{BUG_LINE}:5: WF401" in proc.stdout


def test_usage_errors_exit_two_on_stderr(project: Path) -> None:
    for args in (["--select", "WF999"], ["--extend-ignore", "XX1"], ["missing.py"], ["--config", "nope.toml"]):
        proc = warpfix("check", "--no-cache", *args, cwd=project)
        assert proc.returncode == 2, args
        assert proc.stdout == "" or "missing.py" not in proc.stdout
        assert proc.stderr.strip() and "Traceback" not in proc.stderr


def test_output_format_alias_and_output_file(project: Path) -> None:
    a = warpfix("check", "--no-cache", "--output-format", "json", "train.py", cwd=project)
    b = warpfix("check", "--no-cache", "--format", "json", "train.py", cwd=project)
    assert findings(a) == findings(b) == [("WF401", "train.py", BUG_LINE)]
    c = warpfix("check", "--no-cache", "--output-format", "json", "-o", "report.json", "train.py", cwd=project)
    assert c.returncode == 1 and c.stdout == ""
    assert json.loads((project / "report.json").read_text())["findings"][0]["rule"] == "WF401"


def test_statistics(project: Path) -> None:
    (project / "train.py").write_text(TWO_RULES)
    (project / "other.py").write_text(BUGGY)
    proc = warpfix("check", "--no-cache", "--statistics", ".", cwd=project)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == ["2\tWF401\t[*] inplace-mul", "1\tWF702\t[*] singular-point"]
    data = json.loads(warpfix("check", "--no-cache", "--statistics", "--output-format", "json", ".",
                              cwd=project).stdout)
    assert data[0] == {"code": "WF401", "name": "inplace-mul", "count": 2, "fixable": True}


def test_extend_select_and_extend_ignore(project: Path) -> None:
    (project / "train.py").write_text(TWO_RULES)
    (project / "pyproject.toml").write_text('[tool.warpfix]\nselect = ["WF7"]\n')
    base = warpfix("check", "--no-cache", "--format", "json", "train.py", cwd=project)
    assert [r for r, _, _ in findings(base)] == ["WF702"]
    more = warpfix("check", "--no-cache", "--format", "json", "--extend-select", "WF401", "train.py", cwd=project)
    assert [r for r, _, _ in findings(more)] == ["WF401", "WF702"]
    less = warpfix("check", "--no-cache", "--format", "json", "--extend-select", "WF401", "--extend-ignore",
                   "WF702", "train.py", cwd=project)
    assert [r for r, _, _ in findings(less)] == ["WF401"]


def test_fixable_and_unfixable(project: Path) -> None:
    (project / "train.py").write_text(TWO_RULES)
    proc = warpfix("apply", "--no-cache", "--unfixable", "WF401", "train.py", cwd=project)
    text = (project / "train.py").read_text()
    assert proc.returncode == 1 and "x[i] *= s" in text and "wp.sqrt(wp.dot" not in text
    (project / "train.py").write_text(TWO_RULES)
    proc = warpfix("apply", "--no-cache", "--fixable", "WF401", "train.py", cwd=project)
    text = (project / "train.py").read_text()
    assert "x[i] *= s" not in text and "wp.sqrt(wp.dot" in text
    # check shows no fix marker for an unfixable rule
    (project / "train.py").write_text(BUGGY)
    out = warpfix("check", "--no-cache", "--unfixable", "WF4", "train.py", cwd=project).stdout
    assert "WF401 [*]" not in out and "WF401 " in out


def test_config_file_and_isolated(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.warpfix]\nignore = ["WF401"]\n')
    assert warpfix("check", "--no-cache", "train.py", cwd=project).returncode == 0
    assert warpfix("check", "--no-cache", "--isolated", "train.py", cwd=project).returncode == 1
    (project / "strict.toml").write_text('select = ["WF4"]\n')
    proc = warpfix("check", "--no-cache", "--config", "strict.toml", "--format", "json", "train.py", cwd=project)
    assert findings(proc) == [("WF401", "train.py", BUG_LINE)]


def test_show_settings_and_show_files(project: Path) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "pyproject.toml").write_text('[tool.warpfix]\nignore = ["WF7"]\nexclude = ["gen"]\n')
    (project / "pkg" / "gen").mkdir()
    (project / "pkg" / "gen" / "g.py").write_text(BUGGY)
    (project / "pkg" / "m.py").write_text(BUGGY)
    files = warpfix("check", "--show-files", ".", cwd=project)
    assert files.returncode == 0
    assert files.stdout.splitlines() == ["train.py", os.path.join("pkg", "m.py")]
    settings = warpfix("check", "--show-settings", "pkg/m.py", cwd=project)
    assert settings.returncode == 0
    data = json.loads(settings.stdout.split("\n", 1)[1])
    assert data["ignore"] == ["WF7"] and data["exclude"] == ["gen"]
    assert data["path"] == str(project / "pkg" / "pyproject.toml")


def test_add_noqa(project: Path) -> None:
    (project / "train.py").write_text(TWO_RULES.replace("x[i] *= s", "x[i] *= s  # warpfix: ignore[WF2]"))
    proc = warpfix("check", "--no-cache", "--add-noqa", "train.py", cwd=project)
    assert proc.returncode == 0 and "Added 2 suppression comments" in proc.stderr
    lines = (project / "train.py").read_text().splitlines()
    assert lines[BUG_LINE - 1] == "    x[i] *= s  # warpfix: ignore[WF2, WF401]"
    assert lines[12].endswith("  # warpfix: ignore[WF702]")
    after = warpfix("check", "--no-cache", "--format", "json", "train.py", cwd=project)
    assert findings(after) == [("WF000", "train.py", BUG_LINE)]  # only the stale WF2 is left


def test_quiet_and_verbose(project: Path) -> None:
    quiet = warpfix("check", "--no-cache", "-q", "train.py", cwd=project)
    assert "WF401" in quiet.stdout and "Found" not in quiet.stdout
    verbose = warpfix("check", "--no-cache", "-v", "train.py", cwd=project)
    assert "train.py: configuration (defaults)" in verbose.stderr and "1 files checked" in verbose.stderr


def _tty_output(args: list[str], cwd: Path, **extra: str) -> str:
    """Run the command with stdout on a pseudo-terminal and return what it printed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "warpfix", *args], cwd=cwd, stdout=follower,
                            stderr=subprocess.DEVNULL, env=env(**extra))
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode()


def test_color_on_a_terminal_unless_no_color(project: Path) -> None:
    assert "\x1b[" in _tty_output(["check", "--no-cache", "train.py"], project)
    assert "\x1b[" not in _tty_output(["check", "--no-cache", "--no-color", "train.py"], project)
    assert "\x1b[" not in _tty_output(["check", "--no-cache", "train.py"], project, NO_COLOR="1")


def test_watch_checks_again_after_a_change(project: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "warpfix", "check", "--no-cache", "--watch", "train.py"],
                            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 120

        def read_until(marker: str) -> None:
            while time.monotonic() < deadline:
                line = proc.stderr.readline()
                lines.append(line)
                if marker in line:
                    return
            raise AssertionError("".join(lines))

        read_until("watching for changes")
        time.sleep(0.1)
        (project / "train.py").write_text(BUGGY.replace("x[i] *= s", "x[i] = s"))
        read_until("change detected")
        read_until("watching for changes")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    reports = out.split("Found ")
    assert f"train.py:{BUG_LINE}:5: WF401" in reports[0]
    assert "All checks passed!" in out.split("WF401")[-1]


def test_help_shows_every_flag() -> None:
    text = warpfix("check", "--help", cwd=".").stdout
    for flag in ("--exit-zero", "--statistics", "--output-file", "--extend-select", "--extend-ignore",
                 "--fixable", "--unfixable", "--config", "--isolated", "--show-settings", "--show-files",
                 "--add-noqa", "--no-color", "--quiet", "--verbose", "--watch", "--output-format",
                 "--warp-version", "--stdin-filename", "--debug"):
        assert flag in text, flag
    assert "--warp-version" in warpfix("apply", "--help", cwd=".").stdout


def test_stdin_reports_what_the_file_reports(project: Path) -> None:
    (project / "sim.py").write_text(
        "import warp as wp\n\n\n@wp.kernel\ndef scale(x: wp.array(dtype=float), s: float):\n"
        "    i = wp.tid()\n    x[i] *= s\n"
    )
    (project / "train.py").write_text(
        "import warp as wp\nfrom sim import scale\n\nx = wp.ones(4, dtype=float, requires_grad=True)\n"
        "tape = wp.Tape()\nwith tape:\n    wp.launch(scale, 4, inputs=[x, 2.0])\ntape.backward(grads={x: x})\n"
    )
    (project / "pyproject.toml").write_text('[tool.warpfix]\nignore = ["WF3"]\n')
    for name in ("train.py", "sim.py"):
        direct = warpfix("check", "--no-cache", "--format", "json", name, cwd=project)
        piped = warpfix("check", "--format", "json", "--stdin-filename", name, "-", cwd=project,
                        stdin=(project / name).read_text())
        assert direct.returncode == piped.returncode
        assert findings(direct) == findings(piped) != []


def test_apply_on_stdin_prints_the_fixed_source(project: Path) -> None:
    proc = warpfix("apply", "--no-cache", "--stdin-filename", "train.py", "-", cwd=project, stdin=BUGGY)
    assert proc.returncode == 1
    assert (project / "train.py").read_text() == BUGGY  # nothing written
    assert warpfix("apply", "--no-cache", "train.py", cwd=project).returncode == 1
    assert proc.stdout == (project / "train.py").read_text() != BUGGY
    again = warpfix("apply", "--no-cache", "--stdin-filename", "train.py", "-", cwd=project, stdin=proc.stdout)
    assert again.returncode == 0 and again.stdout == proc.stdout
    broken = "import warp as wp\ndef f(:\n"
    bad = warpfix("apply", "--no-cache", "-", cwd=project, stdin=broken)
    assert bad.returncode == 2 and bad.stdout == broken and "syntax error" in bad.stderr


def test_file_level_ignore(project: Path) -> None:
    (project / "train.py").write_text("# warpfix: ignore-file[WF4]\n" + TWO_RULES)
    proc = warpfix("check", "--no-cache", "--format", "json", "train.py", cwd=project)
    assert [r for r, _, _ in findings(proc)] == ["WF702"]
    (project / "train.py").write_text(TWO_RULES + "# warpfix: ignore-file\n")
    assert warpfix("check", "--no-cache", "train.py", cwd=project).returncode == 0
    # on a line of code it is not a file-level comment
    (project / "train.py").write_text(BUGGY.replace("x[i] *= s", "x[i] *= s  # warpfix: ignore-file"))
    assert warpfix("check", "--no-cache", "train.py", cwd=project).returncode == 1


def test_unknown_and_unused_suppressions_are_wf000(project: Path) -> None:
    text = BUGGY.replace("x[i] *= s", "x[i] *= s  # warpfix: ignore[WF401, WF999]").replace(
        "i = wp.tid()\n    wp.atomic_add", "i = wp.tid()  # warpfix: ignore[WF702]\n    wp.atomic_add")
    (project / "train.py").write_text(text)
    proc = warpfix("check", "--no-cache", "--format", "json", "train.py", cwd=project)
    data = json.loads(proc.stdout)["findings"]
    assert [(f["rule"], f["line"]) for f in data] == [("WF000", BUG_LINE), ("WF000", 12)]
    assert "unknown rule ID `WF999`" in data[0]["message"] and "unused suppression of `WF702`" in data[1]["message"]
    # with WF702 not selected, its suppression is not called unused
    proc = warpfix("check", "--no-cache", "--format", "json", "--select", "WF0,WF4", "train.py", cwd=project)
    assert [f["line"] for f in json.loads(proc.stdout)["findings"]] == [BUG_LINE]
    assert warpfix("check", "--no-cache", "--ignore", "WF000", "train.py", cwd=project).returncode == 0


@pytest.mark.parametrize("rule", ["WF000", "WF804", "WF901", "WF902", "WF903", "WF904", "WF905"])
def test_rules_documents_every_readme_id(rule: str) -> None:
    proc = warpfix("rules", rule, cwd=".")
    assert proc.returncode == 0 and proc.stdout.startswith(f"# {rule} ")
    assert "## What it does" in proc.stdout
    assert rule in warpfix("rules", cwd=".").stdout


def test_internal_error_exits_two_with_one_line(project: Path) -> None:
    inject = ("import sys, warpfix.engine as e\n"
              "def boom(*a, **k):\n    raise ZeroDivisionError('planted')\n"
              "e.run_rules = boom\nfrom warpfix.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    base = [sys.executable, "-c", inject, "check", "--no-cache", "train.py"]
    proc = subprocess.run(base, cwd=project, capture_output=True, text=True, env=env(), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "internal error: ZeroDivisionError: planted" in proc.stderr
    assert "--debug" in proc.stderr
    debug = subprocess.run([*base, "--debug"], cwd=project, capture_output=True, text=True, env=env(), timeout=120)
    assert debug.returncode != 0 and "Traceback" in debug.stderr
