"""How ``warpfix apply`` writes (issue 11 item 6): broken files skipped, permissions, owner, hard links,
read-only files and folders. Through the real command, plus the writer itself for what a test
cannot arrange otherwise (a folder where no temporary file can be created, as root)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from _cli import BUGGY, warpfix

from warpfix.fsutil import read_source, write_source

is_root = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "main.py").write_text(BUGGY)
    return tmp_path


def test_broken_files_are_reported_and_the_others_fixed(project: Path) -> None:
    (project / "broken.py").write_text("import warp as wp\ndef f(:\n")
    os.symlink("loop.py", project / "loop.py")
    proc = warpfix("apply", "--no-cache", ".", cwd=project)
    assert proc.returncode == 2
    assert (project / "main.py").read_text() != BUGGY
    err = proc.stderr.splitlines()
    assert len(err) == 2 and "Traceback" not in proc.stderr
    assert any("broken.py" in e and "syntax error" in e for e in err)
    assert any("loop.py" in e and "symbolic links" in e for e in err)


def test_the_fix_hook_command_fixes_the_other_staged_files(project: Path) -> None:
    """The pre-commit ``warpfix`` hook's entry (.pre-commit-hooks.yaml), given the staged files as
    pre-commit passes them: a broken one is named on stderr and the others are still fixed."""
    (project / "broken.py").write_text("import warp as wp\ndef f(:\n")
    proc = warpfix("apply", "--check-if-configured", "--no-cache", "broken.py", "main.py", cwd=project)
    assert proc.returncode == 2
    assert (project / "main.py").read_text() != BUGGY
    assert [e for e in proc.stderr.splitlines() if "broken.py" in e and "syntax error" in e]
    assert "Traceback" not in proc.stderr


def test_hard_links_and_mode_are_kept(project: Path) -> None:
    path, link = project / "main.py", project / "alias.py"
    os.link(path, link)
    path.chmod(0o640)
    inode = path.stat().st_ino
    assert warpfix("apply", "--no-cache", "main.py", cwd=project).returncode == 1
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2
    assert link.read_text() == path.read_text() != BUGGY
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.skipif(not is_root, reason="changing a file's owner needs root")
def test_owner_is_kept_when_fixing_as_root(project: Path) -> None:
    path = project / "main.py"
    os.chown(path, 12345, 12345)
    assert warpfix("apply", "--no-cache", "main.py", cwd=project).returncode == 1
    assert path.read_text() != BUGGY
    assert (path.stat().st_uid, path.stat().st_gid) == (12345, 12345)


def test_a_read_only_file_is_refused(project: Path) -> None:
    path = project / "main.py"
    path.chmod(0o444)
    proc = warpfix("apply", "--no-cache", "main.py", cwd=project)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: main.py: read-only file; not written (make it writable to let warpfix fix it)"
    assert path.read_text() == BUGGY and stat.S_IMODE(path.stat().st_mode) == 0o444


def test_a_writable_file_in_a_read_only_folder(project: Path) -> None:
    folder = project / "ro"
    folder.mkdir()
    (folder / "main.py").write_text(BUGGY)
    folder.chmod(0o555)
    try:
        proc = warpfix("apply", "--no-cache", "ro/main.py", cwd=project)
    finally:
        folder.chmod(0o755)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (folder / "main.py").read_text() != BUGGY
    assert [p.name for p in folder.iterdir()] == ["main.py"]


def test_no_temporary_file_possible_writes_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a read-only folder does to a non-root user: the temporary file cannot be created."""
    import tempfile

    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    inode = path.stat().st_ino

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    write_source(read_source(str(path)), "x = 2\n")
    assert path.read_text() == "x = 2\n" and path.stat().st_ino == inode
