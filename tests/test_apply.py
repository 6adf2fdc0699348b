"""``warpfix apply``: rewriting files safely, diffs, exit codes, JSON, idempotence."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from pathlib import Path

import pytest

from warpfix.cli import main
from warpfix.fsutil import SourceError, read_source, write_source

BUGGY = textwrap.dedent("""\
    import warp as wp


    @wp.kernel
    def damp(v: wp.array(dtype=wp.vec3), k: wp.array(dtype=float)):
        i = wp.tid()
        v[i] *= k[0]  # damping


    @wp.kernel
    def energy(v: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, wp.sqrt(wp.dot(v[i], v[i])))


    v = wp.ones(8, dtype=wp.vec3, requires_grad=True)
    k = wp.full(1, 0.9, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(damp, dim=8, inputs=[v, k])
        wp.launch(energy, dim=8, inputs=[v], outputs=[loss])
    tape.backward(loss)
""")

FIXED = textwrap.dedent("""\
    import warp as wp


    @wp.kernel
    def damp(v: wp.array(dtype=wp.vec3), k: wp.array(dtype=float), v_out: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        v_out[i] = v[i] * k[0]  # damping


    @wp.kernel
    def energy(v: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, wp.length(v[i]))


    v = wp.ones(8, dtype=wp.vec3, requires_grad=True)
    k = wp.full(1, 0.9, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        v_out = wp.empty_like(v)
        wp.launch(damp, dim=8, inputs=[v, k], outputs=[v_out])
        v = v_out
        wp.launch(energy, dim=8, inputs=[v], outputs=[loss])
    tape.backward(loss)
""")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "main.py").write_text(BUGGY, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def apply(*args: str) -> int:
    return main(["apply", "--no-cache", *args])


def test_apply_fixes_then_is_a_no_op(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert apply(".") == 1
    assert (project / "main.py").read_text(encoding="utf-8") == FIXED
    out = capsys.readouterr().out
    assert "WF401" in out and "WF702" in out and "2 fixes applied in 1 file" in out
    assert apply(".") == 0
    assert (project / "main.py").read_text(encoding="utf-8") == FIXED
    assert "0 fixes applied" in capsys.readouterr().out


def test_diff_writes_nothing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert apply("--diff", "main.py") == 1
    out = capsys.readouterr().out
    assert out.startswith("--- a/main.py\n+++ b/main.py\n")
    assert "-    v[i] *= k[0]  # damping\n+    v_out[i] = v[i] * k[0]  # damping\n" in out
    assert (project / "main.py").read_text(encoding="utf-8") == BUGGY


STRUCT_BOUND = textwrap.dedent("""\
    import warp as wp


    @wp.struct
    class Lights:
        n: int


    @wp.kernel
    def shade(x: wp.array(dtype=float), lights: Lights, loss: wp.array(dtype=float)):
        i = wp.tid()
        s = float(1.0)
        for _j in range(lights.n):
            s = s * x[i]
        wp.atomic_add(loss, 0, s * x[i])


    lights = Lights()
    lights.n = 3
    x = wp.ones(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(shade, dim=4, inputs=[x, lights], outputs=[loss])
    tape.backward(loss)
""")


def test_diff_says_on_stderr_what_it_would_do_and_why_not(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """stdout holds the diffs alone; stderr names each fix that would not be made, with why, and the count."""
    assert apply("--diff", "main.py") == 1
    captured = capsys.readouterr()
    assert "Would apply 2 fixes in 1 file" in captured.err and "Would" not in captured.out
    (project / "shade.py").write_text(STRUCT_BOUND, encoding="utf-8")
    assert apply("--diff", "shade.py") == 1  # an error-level finding remains
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "shade.py:15: WF403 not fixed: " in captured.err and "Would apply 0 fixes in 0 files" in captured.err
    assert apply("--diff", "-q", "shade.py") == 1
    assert capsys.readouterr().err == ""


def test_select_limits_the_fixes(project: Path) -> None:
    assert apply("--select", "WF702", ".") == 1
    text = (project / "main.py").read_text(encoding="utf-8")
    assert "wp.length(v[i])" in text and "v[i] *= k[0]" in text


def test_json_report(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert apply("--format", "json", "--diff", ".") == 1
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == 1
    kept = {(e["rule"], e["path"], e["line"], e["kept"]) for e in data["edits"]}
    assert kept == {("WF401", "main.py", 7, True), ("WF702", "main.py", 13, True)}
    assert all(set(e) == {"rule", "path", "line", "kept", "reason", "fd_before", "fd_after"} for e in data["edits"])
    assert data["findings"] == []
    assert data["errors"] == []


def test_json_report_lists_the_files_it_could_not_read_or_write(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that does not parse and a read-only file with a fix: each is an error of its own file, in
    the JSON as in `check`'s (exit 2); the JSON is still printed."""
    (project / "bad.py").write_text("import warp as wp\ndef f(:\n", encoding="utf-8")
    (project / "main.py").chmod(0o444)
    assert apply("--format", "json", ".") == 2
    data = json.loads(capsys.readouterr().out)
    assert [e["path"] for e in data["errors"]] == ["bad.py", "main.py"]
    assert data["errors"][0]["message"].startswith("syntax error at line 2")
    assert data["errors"][1]["message"].startswith("read-only file; not written")
    assert {e["kept"] for e in data["edits"]} == {True}  # planned, not written


def test_line_endings_bom_and_mode_are_kept(project: Path) -> None:
    path = project / "main.py"
    path.write_bytes(b"\xef\xbb\xbf" + BUGGY.replace("\n", "\r\n").encode("utf-8"))
    path.chmod(0o754)
    assert apply(".") == 1
    data = path.read_bytes()
    assert data == b"\xef\xbb\xbf" + FIXED.replace("\n", "\r\n").encode("utf-8")
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    assert [p.name for p in project.iterdir() if p.name.startswith(".warpfix-")] == []


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("broken.py", b"import warp as wp\ndef (:\n", "syntax error"),
        ("latin.py", b"import warp as wp\nx = '\xe9'\n", "not valid UTF-8"),
    ],
)
def test_bad_input_is_reported_and_skipped(
    project: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, message: str
) -> None:
    """A broken file is named in one line and left alone; the other files are still fixed (exit 2)."""
    (project / name).write_bytes(content)
    assert apply(".") == 2
    err = capsys.readouterr().err
    assert message in err and name in err and len(err.strip().splitlines()) == 1
    assert (project / "main.py").read_text(encoding="utf-8") == FIXED
    assert (project / name).read_bytes() == content


def test_missing_path(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert apply("main.py", "nowhere.py") == 2
    assert capsys.readouterr().err == "warpfix: nowhere.py: no such file or directory\n"
    assert (project / "main.py").read_text(encoding="utf-8") == BUGGY


def test_command_without_check_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert apply(".", "--", "python", "main.py") == 2
    assert "only used with --check" in capsys.readouterr().err


def test_check_needs_a_command(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert apply("--check", ".") == 2
    assert "--check needs the program" in capsys.readouterr().err


def test_unsafe_fixes_need_the_flag(project: Path) -> None:
    path = project / "main.py"
    path.write_text(BUGGY.replace("@wp.kernel\ndef energy", "@wp.kernel(enable_backward=False)\ndef energy"),
                    encoding="utf-8")
    assert apply("--select", "WF202", ".") == 1  # nothing changed, but an error-level finding remains
    assert "enable_backward=False" in path.read_text(encoding="utf-8")
    assert apply("--select", "WF202", "--unsafe-fixes", ".") == 1
    assert "enable_backward" not in path.read_text(encoding="utf-8")


def test_write_source_refuses_a_file_changed_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n", encoding="utf-8")
    original = read_source(str(path))
    path.write_text("x = 2\n", encoding="utf-8")
    with pytest.raises(SourceError, match="changed on disk"):
        write_source(original, "x = 3\n")
    assert path.read_text(encoding="utf-8") == "x = 2\n"


def test_write_source_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text("x = 1\n", encoding="utf-8")
    link = tmp_path / "link.py"
    os.symlink(real, link)
    write_source(read_source(str(link)), "x = 2\n")
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "x = 2\n"


def test_check_if_configured_runs_fd_only_with_an_entry(tmp_path, monkeypatch) -> None:
    """The pre-commit hook's flag: static without `[tool.warpfix] entry`, `--check` with one."""
    import warpfix.apply as apply_cmd
    from warpfix.cli import main

    (tmp_path / "m.py").write_text("import warp as wp\nx = wp.zeros(3)\n")
    monkeypatch.chdir(tmp_path)
    calls: list[list[str]] = []

    def fake_check_fixes(paths, command, **kwargs):
        calls.append(command)
        raise SystemExit(0)

    monkeypatch.setattr(apply_cmd, "check_fixes", fake_check_fixes)
    assert main(["apply", "--check-if-configured", "--no-cache", "m.py"]) == 0
    assert calls == []
    (tmp_path / "pyproject.toml").write_text('[tool.warpfix]\nentry = ["python", "m.py"]\n')
    try:
        main(["apply", "--check-if-configured", "--no-cache", "m.py"])
    except SystemExit:
        pass
    assert calls == [["python", "m.py"]]


def _program(folder: Path, sim: str, run: str) -> None:
    folder.mkdir()
    (folder / "sim.py").write_text(textwrap.dedent(sim))
    (folder / "run.py").write_text(textwrap.dedent(run))


_BUGGY_SIM = """\
    import warp as wp


    @wp.kernel
    def scale(x: wp.array(dtype=float), s: float):
        i = wp.tid()
        x[i] *= s
"""
_BUGGY_RUN = """\
    import warp as wp

    from sim import scale


    @wp.kernel
    def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
        wp.atomic_add(loss, 0, x[wp.tid()])


    x = wp.ones(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp.launch(scale, dim=4, inputs=[x, 2.0])
        wp.launch(total, dim=4, inputs=[x], outputs=[loss])
    tape.backward(loss)
"""
_CLEAN_SIM = """\
    import warp as wp


    @wp.kernel
    def scale(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * s
"""
_CLEAN_RUN = """\
    import warp as wp

    import sim

    x = wp.ones(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp.launch(sim.scale, dim=4, inputs=[x, 2.0], outputs=[y])
"""


@pytest.mark.parametrize("buggy_copies", [1, 2])
def test_apply_rewrites_only_the_program_that_launches_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, buggy_copies: int
) -> None:
    """Issue 11: a same-named clean kernel in a sibling folder is another program's; its launch stays."""
    for k in range(buggy_copies):  # packages (`python -m buggy0.run`): each `.sim` resolves to one file
        _program(tmp_path / f"buggy{k}", _BUGGY_SIM, _BUGGY_RUN.replace("from sim", "from .sim"))
        (tmp_path / f"buggy{k}" / "__init__.py").write_text("")
    _program(tmp_path / "clean", _CLEAN_SIM, _CLEAN_RUN)
    monkeypatch.chdir(tmp_path)
    assert apply("--select", "WF401", ".") in (0, 1)
    assert (tmp_path / "clean" / "sim.py").read_text() == textwrap.dedent(_CLEAN_SIM)
    assert (tmp_path / "clean" / "run.py").read_text() == textwrap.dedent(_CLEAN_RUN)
    for k in range(buggy_copies):
        run = (tmp_path / f"buggy{k}" / "run.py").read_text()
        assert "inputs=[x, 2.0], outputs=[x_out])" in run and run.count("x_out") == 3
        assert "x_out[i] = x[i] * s" in (tmp_path / f"buggy{k}" / "sim.py").read_text()
