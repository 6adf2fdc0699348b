"""Process hygiene and scratch copies (warpfix/procs.py): no program or child outlives verify or
apply --check; trial copies link large data and map absolute and ``../`` paths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.test_apply import BUGGY
from warpfix.apply import Selection, check_fixes
from warpfix.procs import map_command, run_group, scratch_copy
from warpfix.verify import run_verify
from warpfix.verify.report import VerifyReport

REPO = Path(__file__).resolve().parent.parent

# spawns a sleeping grandchild in the background, writes its pid, then waits or exits
SPAWNER = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    open(sys.argv[1], "w").write(str(child.pid))
    if sys.argv[2] == "wait":
        time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status  # a zombie has ended


def _wait_pid(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the program did not start its child")


def _gone(pid: int) -> bool:
    for _ in range(100):
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_background_child_does_not_outlive_a_normal_exit(tmp_path: Path) -> None:
    (tmp_path / "spawn.py").write_text(SPAWNER)
    with open(tmp_path / "log", "wb") as log:
        done = run_group([sys.executable, "spawn.py", "pid", "exit"], cwd=str(tmp_path), env=None, timeout=60,
                         output=log)  # fmt: skip
    assert done.returncode == 0 and not done.timed_out
    assert _gone(_wait_pid(tmp_path / "pid"))


def test_timeout_ends_the_whole_group(tmp_path: Path) -> None:
    (tmp_path / "spawn.py").write_text(SPAWNER)
    started = time.perf_counter()
    with open(tmp_path / "log", "wb") as log:
        done = run_group([sys.executable, "spawn.py", "pid", "wait"], cwd=str(tmp_path), env=None, timeout=3,
                         output=log)  # fmt: skip
    assert done.timed_out and time.perf_counter() - started < 30
    assert _gone(_wait_pid(tmp_path / "pid"))


def test_verify_timeout_reports_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "spawn.py").write_text(SPAWNER)
    # long enough for the probe to start (import warp) on a loaded machine, far below the program's 120 s
    report = run_verify([sys.executable, "spawn.py", "pid", "wait"], cwd=str(tmp_path), timeout=20)
    assert report.exit_code == 2 and "within 20 s" in report.error
    assert _gone(_wait_pid(tmp_path / "pid"))


def test_ctrl_c_ends_the_program_and_its_children(tmp_path: Path) -> None:
    (tmp_path / "spawn.py").write_text(SPAWNER)
    driver = textwrap.dedent(
        f"""
        import signal, sys
        # a terminal's warpfix handles SIGINT; under the full suite the xdist worker sometimes forks
        # this driver with SIGINT and SIGQUIT ignored (seen in its /proc status: SigIgn 0x...06)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, {str(REPO)!r})
        from warpfix.cli import main
        sys.exit(main(["verify", "--timeout", "100", "--", sys.executable, "spawn.py", "pid", "wait"]))
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        child = _wait_pid(tmp_path / "pid")
        os.kill(proc.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert b"interrupted" in err and b"Traceback" not in err
    assert _gone(child)
    out = subprocess.run(["pgrep", "-f", str(tmp_path / "spawn.py")], capture_output=True, text=True)
    assert out.stdout.strip() == ""


def test_scratch_copy_links_large_data_and_copies_sources(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "data").mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / "main.py").write_text("print(1)\n")
    (root / "pkg" / "mod.py").write_text("X = 1\n")
    (root / ".venv" / "bin").mkdir(parents=True)
    big = root / "data" / "big.bin"
    with open(big, "wb") as fh:  # 4 GiB, sparse: copying it would take long and fill the disk
        fh.truncate(4 << 30)
    started = time.perf_counter()
    dest = tmp_path / "scratch"
    scratch_copy(str(root), str(dest))
    assert time.perf_counter() - started < 5
    assert (dest / "data" / "big.bin").is_symlink()
    assert os.path.realpath(dest / "data" / "big.bin") == str(big)
    assert not (dest / "main.py").is_symlink() and (dest / "main.py").read_text() == "print(1)\n"
    assert not (dest / "pkg" / "mod.py").is_symlink()
    assert not (dest / ".venv").exists()
    (dest / "data" / "new.txt").write_text("written in the copy")  # new files stay in the copy
    assert not (root / "data" / "new.txt").exists()


def test_map_command_points_paths_at_the_copy(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    (root / "main.py").write_text("")
    (root / "sub" / "run.py").write_text("")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").write_text("")
    (tmp_path / "outside.py").write_text("")
    scratch = tmp_path / "copy"
    scratch_copy(str(root), str(scratch))
    mapped = map_command(["python", str(root / "main.py"), "--out", "sub/run.py"], str(root), str(scratch))
    assert mapped == ["python", str(scratch / "main.py"), "--out", "sub/run.py"]
    assert map_command([".venv/bin/python", "main.py"], str(root), str(scratch)) == [
        str(root / ".venv" / "bin" / "python"), "main.py",
    ]  # fmt: skip
    assert map_command(["python", "sub/../main.py"], str(root), str(scratch))[1] == "sub/../main.py"
    with pytest.raises(ValueError, match="outside the project folder"):
        map_command(["python", "../outside.py"], str(root), str(scratch))


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str, str]] = []

    def __call__(self, cmd: list[str], *, cwd: str, device: str | None = None, timeout: float = 120.0):
        script = Path(cmd[1]) if os.path.isabs(cmd[1]) else Path(cwd) / cmd[1]
        self.calls.append((cmd, cwd, script.read_text(encoding="utf-8")))
        return VerifyReport(error="stop here")


def test_apply_check_runs_the_copy_for_an_absolute_script_path(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "main.py").write_text(BUGGY, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    verify = _Recorder()
    check_fixes(["."], ["python", str(tmp_path / "main.py")], selection=Selection(use_cache=False), verify=verify)
    cmd, cwd, _ = verify.calls[0]
    assert cmd[1] == os.path.join(cwd, "main.py") and cwd != str(tmp_path)


def test_apply_check_refuses_a_script_outside_the_project(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "main.py").write_text(BUGGY, encoding="utf-8")
    (tmp_path / "main.py").write_text(BUGGY, encoding="utf-8")
    monkeypatch.chdir(tmp_path / "proj")
    verify = _Recorder()
    result = check_fixes(["."], ["python", "../main.py"], selection=Selection(use_cache=False), verify=verify)
    assert verify.calls == []
    assert len(result.errors) == 1 and "outside the project folder" in result.errors[0]
