"""Parent side of `warpfix verify`: run the command as given with the probe injected, read its result.

The command runs exactly as the user wrote it (``/other/venv/bin/python train.py``, ``python -m
pkg.train``, a console script): the probe reaches the program's interpreter through a
``sitecustomize`` on ``PYTHONPATH``, in a temporary folder that holds nothing but the probe
package (which needs only warp and numpy there).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from warpfix.procs import run_group, sigterm_as_interrupt
from warpfix.verify.discriminate import ENV_AGAINST, ENV_SAVE
from warpfix.verify.probe import ENV_DEVICE, ENV_FD_FLOOR, ENV_OUT, ENV_PATH
from warpfix.verify.report import VerifyReport, report_from_probe

#: The probe's modules (relative imports only), copied into the injected package.
PROBE_MODULES = ("probe.py", "records.py", "fd.py", "ladder.py", "judge.py", "adjoint.py", "spans.py", "sketch.py", "cut_chain.py",
                 "early_grad.py", "leftovers.py", "flag_trust.py", "program_sites.py", "array_tracking.py",
                 "op_recording.py", "launch_hooks.py", "backward_checks.py", "tape_cover.py", "replay_holds.py",
                 "fd_replay.py", "discriminate.py", "slab_reads.py")
PROBE_PACKAGE = "_warpfix_probe"

_SITECUSTOMIZE = '''\
"""Injected by `warpfix verify`: start the probe, then the sitecustomize this one shadows (if any)."""
import os
import sys

if os.environ.get("{out}"):
    try:
        from {pkg}.probe import bootstrap
    except Exception as exc:  # the interpreter lacks numpy or warp: one line, and the program does not run
        import json

        with open(os.environ["{out}"], "w") as f:
            why = "the program's interpreter %s cannot load the probe: %s: %s" % (sys.executable, type(exc).__name__, exc)
            json.dump({{"backwards": [], "findings": [], "error": why, "stopped": "probe"}}, f)
        os._exit(0)
    bootstrap()
_here = os.path.dirname(os.path.abspath(__file__))
_self = sys.modules.pop("sitecustomize")
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
try:
    import sitecustomize  # noqa: F401
except ImportError:
    pass
sys.modules["sitecustomize"] = _self  # the import of this module ends by taking it back out of sys.modules
'''


def install_probe(folder: str) -> str:
    """Write the probe package and its sitecustomize under ``folder``; return the PYTHONPATH entry."""
    root = Path(folder) / "probe-path"
    pkg = root / PROBE_PACKAGE
    pkg.mkdir(parents=True)
    here = Path(__file__).resolve().parent
    for name in PROBE_MODULES:
        shutil.copyfile(here / name, pkg / name)
    (pkg / "__init__.py").write_text('"""The warpfix verify probe (a copy; needs only warp and numpy)."""\n')
    (root / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(out=ENV_OUT, pkg=PROBE_PACKAGE))
    return str(root)


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", errors="replace")


def run_verify(
    cmd: list[str], *, cwd: str, device: str | None = None, timeout: float = 120.0, fd_floor: float | None = None,
    save_gradients: str | None = None, against_gradients: str | None = None,
) -> VerifyReport:
    """Run ``cmd`` (e.g. ``["python", "train.py", "--small"]``) in ``cwd`` under the FD probe.

    The probe traces the first training iterations, compares the gradient of every
    ``tape.backward`` with central finite differences of the replayed iteration, checks tape
    integrity (WF902/903/905) and custom adjoints (WF804), then stops the program. The
    program runs in its own process group, ended (with any background children) when it
    exits, after ``timeout`` seconds, and on Ctrl-C (KeyboardInterrupt is re-raised).
    FD takes at most twice the program's own run time, or ``fd_floor`` seconds when that is
    more (default :data:`warpfix.verify.fd.FD_BUDGET_S`). ``save_gradients``: a folder where the first
    iteration's gradients are saved; ``against_gradients``: such a folder of an earlier run, along whose
    difference FD measures each gradient that changed (``apply --check``: :mod:`warpfix.verify.discriminate`).

    Returns a :class:`VerifyReport`; ``report.error`` is set (and ``exit_code`` is 2) when
    the program could not be verified.
    """
    if not cmd:
        return VerifyReport(error="no command given: use `warpfix verify -- python train.py ...`")
    with tempfile.TemporaryDirectory(prefix="warpfix-verify-") as tmp:
        out_path = Path(tmp) / "result.json"
        log_path = Path(tmp) / "output.log"
        probe_path = install_probe(tmp)
        env = dict(os.environ)
        env[ENV_OUT] = str(out_path)
        env[ENV_PATH] = probe_path
        env.pop(ENV_DEVICE, None)
        env.pop(ENV_FD_FLOOR, None)
        if fd_floor is not None:
            env[ENV_FD_FLOOR] = repr(float(fd_floor))
        env.pop(ENV_SAVE, None)
        env.pop(ENV_AGAINST, None)
        if save_gradients:
            env[ENV_SAVE] = save_gradients
        if against_gradients:
            env[ENV_AGAINST] = against_gradients
        if device:
            env[ENV_DEVICE] = device
        env["PYTHONPATH"] = os.pathsep.join(p for p in (probe_path, env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(log_path, "wb") as log, sigterm_as_interrupt():
            try:
                done = run_group(cmd, cwd=cwd, env=env, timeout=timeout, output=log)
            except OSError as exc:
                return VerifyReport(error=f"cannot run {cmd[0]!r}: {exc.strerror or exc}")
        output = _tail(log_path)
        raw: dict | None = None
        if out_path.exists():
            try:
                raw = json.loads(out_path.read_text())
            except json.JSONDecodeError:
                raw = None
    report = report_from_probe(raw) if raw is not None else VerifyReport()
    report.program_output = output
    if done.timed_out:
        report.error = f"the program did not finish its first training iterations within {timeout:g} s (killed)"
        report.stopped = "timeout"
    elif raw is None:
        report.error = (
            f"the probe produced no result (exit status {done.returncode}): the command must run a Python "
            "program that imports warp (the probe starts through sitecustomize; `python -S` or `-I` disable it)"
        )
    elif not raw.get("finished", True):
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"status {done.returncode}"
        report.error = f"the program died ({how}) while the probe was still working: no verdict is given"
    elif report.error is None and report.stopped == "program-exit" and done.returncode != 0:
        report.error = f"the program exited with status {done.returncode}"
    return report
