"""Parent side of `warpfix verify`: start the probe in a subprocess, enforce the timeout, read its result."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from warpfix.verify.report import VerifyReport, report_from_probe

ENV_OUT = "WARPFIX_VERIFY_OUT"
ENV_DEVICE = "WARPFIX_VERIFY_DEVICE"

_PYTHON = re.compile(r"^python[0-9.]*(\.exe)?$")
# interpreter options that take a separate argument
_OPTS_WITH_ARG = {"-W", "-X", "-Q"}


def probe_command(cmd: list[str]) -> list[str]:
    """Translate ``python [opts] script.py args`` / ``python -m pkg.mod args`` into the probe command.

    The program runs under this interpreter (the one warpfix is installed in), like
    ``python`` would run it: ``__main__`` semantics, its own argv and ``sys.path[0]``.
    Raises ValueError for commands the probe cannot host.
    """
    if not cmd:
        raise ValueError("no command given: use `warpfix verify -- python train.py ...`")
    rest = list(cmd)
    if _PYTHON.match(Path(rest[0]).name):
        rest = rest[1:]
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            opt = rest.pop(0)
            if opt == "-c":
                raise ValueError("`python -c` is not supported: put the program in a file")
            if opt in _OPTS_WITH_ARG and rest:
                rest.pop(0)
    elif not rest[0].endswith(".py"):
        raise ValueError(f"cannot verify {rest[0]!r}: the command must run a Python script or module")
    if not rest:
        raise ValueError("no script or module in the command")
    if rest[0] == "-m":
        if len(rest) < 2:
            raise ValueError("`-m` needs a module name")
        target = ["--module", rest[1]]
        args = rest[2:]
    else:
        target = ["--script", rest[0]]
        args = rest[1:]
    return [sys.executable, "-m", "warpfix.verify.probe", *target, "--", *args]


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", errors="replace")


def run_verify(
    cmd: list[str], *, cwd: str, device: str | None = None, timeout: float = 120.0
) -> VerifyReport:
    """Run ``cmd`` (e.g. ``["python", "train.py", "--small"]``) in ``cwd`` under the FD probe.

    The probe traces the first training iteration, compares the gradient of every
    ``tape.backward(loss)`` with central finite differences of the replayed iteration,
    checks tape integrity (WF902/903/905) and custom adjoints (WF804), then stops the
    program. The child is killed (its whole process group) after ``timeout`` seconds.

    Returns a :class:`VerifyReport`; ``report.error`` is set (and ``exit_code`` is 2) when
    the program could not be verified.
    """
    try:
        child = probe_command(cmd)
    except ValueError as exc:
        return VerifyReport(error=str(exc))
    pkg_root = str(Path(__file__).resolve().parents[2])
    with tempfile.TemporaryDirectory(prefix="warpfix-verify-") as tmp:
        out_path = Path(tmp) / "result.json"
        log_path = Path(tmp) / "output.log"
        env = dict(os.environ)
        env[ENV_OUT] = str(out_path)
        if device:
            env[ENV_DEVICE] = device
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        timed_out = False
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                child, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
            try:
                returncode = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                returncode = proc.wait()
        output = _tail(log_path)
        raw: dict | None = None
        if out_path.exists():
            try:
                raw = json.loads(out_path.read_text())
            except json.JSONDecodeError:
                raw = None
    report = report_from_probe(raw) if raw is not None else VerifyReport()
    report.program_output = output
    if timed_out:
        report.error = f"the program did not finish its first training iteration within {timeout:g} s (killed)"
        report.stopped = "timeout"
    elif raw is None:
        report.error = f"the probe produced no result (exit status {returncode})"
    return report
