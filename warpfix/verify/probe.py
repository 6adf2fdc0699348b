"""Child side of `warpfix verify`: run the user's program under hooks and verify its first iterations.

Started by :func:`bootstrap`, from the ``sitecustomize`` the runner puts on the program's
``PYTHONPATH`` (a copy of this package alone: relative imports, only warp and numpy), with
``WARPFIX_VERIFY_OUT`` naming the JSON result file (see :mod:`warpfix.verify.runner`).

What it does (DESIGN.md, "FD verification without a user harness"):

* hooks ``wp.launch`` (and prepared ``Launch.launch``), ``wp.copy``, ``array.zero_/fill_/assign``,
  Warp's native array routines (NATIVE_ROUTINES), ``Tape.backward/reset`` and the allocators' frees,
  records every operation of the first training iteration (the *window*), taped or not,
  with frozen arguments, and snapshots every array the first time an operation touches it;
  then does the same for the next iteration (window 1), where bugs dormant at iteration 0 show;
* at each ``tape.backward`` keeps the gradient that backward adds to every leaf parameter;
  when the program updates parameters from gradients (its optimizer step) compares those with
  central FD of the backward's objective (the loss, or ``sum(seed * output)`` for ``grads=`` and
  hand seeds), replaying the window from where its first tape began (contents kept there);
* runs graph captures eagerly: each ``capture_launch`` replays the captured calls through the hooks;
* checks that arrays a taped launch read are unchanged when its backward starts (WF902),
  that ``.grad`` is zero when the next iteration's backward starts (WF903), and mirrors
  Warp's overwrite tracker on the recorded launches (WF905); at each backward, that no array
  without a gradient cuts the chain to the loss (WF201, :mod:`.cut_chain`) and that no parameter's
  ``.grad`` was read before it (WF302/WF304, :mod:`.early_grad`), and that its tape recorded every
  operation its objective depends on (WF601, :mod:`.tape_cover`);
* stops the program when window 1 ends (a parameter is written from gradient data, a backward
  reads none of the window's parameters), or at a cap: verify never runs a whole training.
"""

from __future__ import annotations

import atexit
import inspect
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

# relative imports only: this package is also copied alone onto the program's PYTHONPATH
from . import program_sites
from .adjoint import check_custom_adjoints
from .adjoint import install_hook as install_adjoint_hook
from .array_tracking import ArrayTracking
from .backward_checks import BackwardChecks
from .cut_chain import CutChain
from .discriminate import Gradients
from .early_grad import EarlyGrad
from .fd import FD_BUDGET_S, FiniteDifferences
from .flag_trust import FlagTrust
from .launch_hooks import LaunchHooks
from .leftovers import Leftovers
from .op_recording import OpRecording
from .program_sites import ProgramSites, _as_program, _ProgramError
from .records import (
    NO_LEAF_ERROR,
    ArrayInfo,
    BackwardRecord,
    Op,
    PendingCompare,
    ProbeGraph,
)
from .spans import SpanIndex
from .tape_cover import TapeCover

ENV_OUT = "WARPFIX_VERIFY_OUT"
ENV_DEVICE = "WARPFIX_VERIFY_DEVICE"
#: The folder holding the probe package and its sitecustomize (removed from the program's children).
ENV_PATH = "WARPFIX_VERIFY_PATH"
#: Seconds FD may take at least (``FD_BUDGET_S`` when unset; ``apply --check`` gives its proofs more).
ENV_FD_FLOOR = "WARPFIX_VERIFY_FD_FLOOR"


class Tracer(ProgramSites, ArrayTracking, OpRecording, LaunchHooks, BackwardChecks, FiniteDifferences):
    """Records the window, runs the FD comparisons, writes the result file."""

    def __init__(self, out_path: str, cwd: str) -> None:
        import warp as wp  # noqa: PLC0415

        self.wp = wp
        self.out_path = out_path
        self.cwd = cwd
        self.enabled = True
        self.depth = 0
        self.mode = "window"  # "window" -> "epilogue" (waiting for the next backward) -> "done"
        self.window = 0  # 0: the first iteration; 1: the next one (bugs dormant at iteration 0)
        self.previous_params: list[ArrayInfo] = []  # parameters of window 0, for WF903 in window 1
        self.past_cap = False  # the first iteration's backwards past BACKWARD_CAP run for their loss alone
        self.loss_mark: tuple[Any, int, dict[int, ArrayInfo]] | None = None  # last loss, op count, arrays then
        self.grad_reads: set[int] = set()  # ids of the gradients the program read (host, launch, copy): consumed
        self.ops: list[Op] = []
        self.arrays: dict[int, ArrayInfo] = {}
        self.spans = SpanIndex()  # the window's arrays (ArrayInfo) by the memory they span
        self.deferred_frees: list[tuple[Callable[..., Any], Any, int, int]] = []
        self.grads: dict[int, Any] = {}  # id(grad array) -> grad array (kept alive)
        self.grad_spans = SpanIndex()  # the same gradients by the memory they span
        self.tape_since: dict[int, int] = {}  # id(tape) -> op index of its last reset
        self.backwards: list[dict[str, Any]] = []
        self.verified: list[BackwardRecord] = []
        self.ops_at_backward = 0  # how many operations the window had recorded at its last backward
        self.window_params: list[ArrayInfo] = []
        self.findings: list[dict[str, Any]] = []
        self._finding_keys: dict[tuple, dict[str, Any]] = {}
        self.flags: dict[int, list[tuple[str, bool, bool]] | None] = {}
        self.flag_trust = FlagTrust()  # whether a kernel's write flags name every array it writes
        self.codegen_warnings: dict[str, list[str]] = {}  # kernel name -> in-kernel tracker warnings
        self.tracker_read: set[int] = set()  # and (slab_reads.py) the slabs read, where every read named one
        self.tracker_slabs: dict[int, set[int]] = {}
        self.next_slabs: dict[int, int] = {}
        self.slab_args: dict[int, tuple[Any, dict[str, str]]] = {}
        self.host_grad_read = False
        self.host_reads: dict[int, tuple[Any, str, int]] = {}  # id -> (array, site, op count): arrays read on the host
        self.error: str | None = None
        self.stopped = ""
        self.orig: dict[str, Any] = {}
        self.signatures: dict[str, inspect.Signature] = {}
        self.aliases: dict[int, tuple[Any, Any]] = {}
        self.taped_kernels: dict[int, Any] = {}
        self.fd_seconds = 0.0
        self.fd_floor = FD_BUDGET_S  # seconds FD may take at least (see fd_budget)
        self.gradients = Gradients(None, None)  # apply --check's gradients of the run before an edit
        self.fd_job_budget = FD_BUDGET_S  # the budget of the comparison running now (fixed when it starts)
        self.fd_start_rung: dict[int, int] = {}  # id(leaf array) -> step-ladder rung where its FD last agreed
        self.rng = np.random.default_rng(0)
        self.main_dir: str | None = None
        self.program_files: dict[str, bool] = {}  # code filename -> is it the program's
        self.relpaths: dict[str, str] = {}
        self.capture: ProbeGraph | None = None  # the graph capture in progress
        self.replaying: ProbeGraph | None = None  # the graph capture_launch replays now
        self.notes: list[str] = []
        self.forced_site: tuple[str, int, str | None] | None = None  # the call site of a replayed captured call
        self.pending: list[PendingCompare] = []
        self.started = time.perf_counter()
        self.fd_deadline = math.inf  # perf_counter() time at which the running comparison stops
        self.leaf_read: dict[int, int] = {}  # info.order -> op index where the latest backward's tape first read it
        self.natives_hooked = False
        self.tape_start: int | None = None  # op index of the window's first taped operation
        self.tape_state: dict[int, Any] = {}  # info.order -> contents of the arrays known at tape_start
        # where the probe's time goes (seconds; "replays" counts FD replays, "run" is the whole run so far)
        self.seconds: dict[str, float] = {"trace": 0.0, "integrity": 0.0, "fd": 0.0}
        self.cut_chain = CutChain(self, program_sites.SKIP_DIRS[0] if program_sites.SKIP_DIRS else "\0")  # WF201: arrays without a gradient
        self.early_grad = EarlyGrad(self)  # WF302/WF304: a gradient read before its backward
        self.tape_cover = TapeCover(self)  # WF601: an objective that depends on work recorded on another tape
        self.leftovers = Leftovers(  # WF903 at the read of a consumed gradient summed into again
            lambda path, line, msg, data: self.add_finding("WF903", path, line, msg, ("WF903", path, line),
                                                           classified_as="WF301", **data),
            lambda arr: self.name_of(arr, self.user_frame()) or getattr(self.arrays.get(id(arr)), "name", "array"))

    # ----------------------------------------------------------------- plumbing
    @contextmanager
    def paused(self) -> Iterator[None]:
        was = self.enabled
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = was

    def tracing(self) -> bool:
        return self.enabled and self.mode == "window" and self.depth == 0 and self.capture is None

    # ----------------------------------------------------------------- window end and output
    def end_window(self) -> None:
        """A parameter was updated from gradients. After window 0, trace the next iteration as window 1
        (its first backward also checks WF903); after window 1 only wait for that check. Past the cap
        (backwards run for their loss alone) the run ends here."""
        if self.past_cap:
            self.finish("cap")
            return
        self.stopped = "window-end"
        self.tape_cover.settle()
        self.flush_pending()
        if self.window == 0 and self.fd_seconds < self.fd_budget() / 2:
            self.window = 1
            self.previous_params = self.window_params
            self.window_params = []
            self.ops = []
            self.drop_arrays()
            self.grads = {}
            self.grad_spans = SpanIndex()
            self.tape_since = {}
            self.leaf_read = {}
            self.tape_start = None
            self.tape_state = {}
            self.verified = []
            self.ops_at_backward = 0
            self.loss_mark = None
            self.host_grad_read = False
            self.host_reads = {}
        else:
            self.mode = "epilogue"
        self.flush()

    def payload(self) -> dict[str, Any]:
        return {
            "backwards": self.backwards,
            "findings": self.findings,
            "error": self.error,
            "stopped": self.stopped,
            "ops": len(self.ops),
            "notes": self.notes,
            "seconds": {**self.seconds, "run": time.perf_counter() - self.started, "fd_budget": self.fd_budget()},
            "finished": self.mode == "done",
        }

    def flush(self) -> None:
        tmp = self.out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.payload(), f, default=float)
        os.replace(tmp, self.out_path)

    def finish(self, why: str, *, end_process: bool = True) -> None:
        """Write the result and (by default) end the process: verify never runs a whole training."""
        if self.mode == "done":
            return
        self.stopped = why
        self.mode = "done"
        self.tape_cover.settle()
        if self.error is None:
            self.flush_pending()
        if self.error is None and not self.backwards:
            self.error = {
                "program-exit": "the program finished without calling tape.backward(loss)",
                "cap": f"no tape.backward within the first {len(self.ops)} operations",
            }.get(why)
        if self.error is None and self.backwards and not any(b["params"] for b in self.backwards):
            self.error = f"{NO_LEAF_ERROR}: " + "; ".join(
                f"{b['site']}: {b.get('note', '')}" for b in self.backwards
            )
        if self.backwards and self.error is None:
            with self.paused():
                try:
                    found = check_custom_adjoints(self.wp, self.relpath, list(self.taped_kernels.values()))
                except Exception as exc:  # noqa: BLE001 - the gradient verdicts stand without this check
                    found = []
                    self.note(f"the custom-adjoint check (WF804) failed: {type(exc).__name__}: {exc}")
                for f in found:
                    self.add_finding(f["rule"], f["path"], f["line"], f["message"], ("WF804", f["path"], f["line"]),
                                     **f.get("data", {}))  # fmt: skip
                    if f.get("severity"):
                        self.findings[-1]["severity"] = f["severity"]
        self.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        if end_process:
            os._exit(0)

    def at_exit(self) -> None:
        """The program ended on its own (or crashed: the excepthook has set the error)."""
        self.finish("crash" if self.error else "program-exit", end_process=False)

    # ----------------------------------------------------------------- installation
    def install(self) -> None:
        wp = self.wp
        ctx = wp._src.context
        types = wp._src.types
        tape_cls = wp._src.tape.Tape
        shield = self.shield

        orig_launch, orig_copy = _as_program(ctx.launch), _as_program(ctx.copy)
        self.orig["copy"] = ctx.copy
        self.orig["launch"] = orig_launch
        self.signatures = {"launch": inspect.signature(ctx.launch), "copy": inspect.signature(ctx.copy)}
        hooks: dict[str, Callable[..., Any]] = {
            "launch": shield(lambda *a, **k: self.on_launch(orig_launch, a, k), ctx.launch),
            "copy": shield(lambda *a, **k: self.on_copy(orig_copy, a, k), ctx.copy),
        }
        for name, handler in (("capture_begin", self.on_capture_begin), ("capture_end", self.on_capture_end)):
            orig = _as_program(getattr(ctx, name))
            hooks[name] = shield(lambda *a, _h=handler, _o=orig, **k: _h(_o, a, k), getattr(ctx, name))
        orig_capture_launch = _as_program(ctx.capture_launch)
        hooks["capture_launch"] = shield(
            lambda graph, *a, **k: self.on_capture_launch(orig_capture_launch, graph, *a, **k), ctx.capture_launch
        )
        for mod in (wp, ctx):
            for name, hook in hooks.items():
                if hasattr(mod, name):
                    setattr(mod, name, hook)

        arr_cls = types.array
        orig_zero, orig_fill = _as_program(arr_cls.zero_), _as_program(arr_cls.fill_)
        orig_assign, orig_numpy = _as_program(arr_cls.assign), arr_cls.numpy
        arr_cls.zero_ = shield(lambda arr: self.on_fill(orig_zero, "zero", arr), arr_cls.zero_)
        arr_cls.fill_ = shield(lambda arr, value: self.on_fill(orig_fill, "fill", arr, value), arr_cls.fill_)
        arr_cls.assign = shield(lambda arr, src: self.on_assign(orig_assign, arr, src), arr_cls.assign)
        arr_cls.numpy = shield(lambda arr, *a, **k: self.on_numpy(orig_numpy, arr, *a, **k), arr_cls.numpy)

        orig_backward, orig_reset = _as_program(tape_cls.backward), _as_program(tape_cls.reset)
        tape_cls.backward = shield(
            lambda tape, loss=None, grads=None: self.on_backward(orig_backward, tape, loss, grads), tape_cls.backward
        )
        tape_cls.reset = shield(lambda tape: self.on_reset(orig_reset, tape), tape_cls.reset)
        orig_prepared = _as_program(ctx.Launch.launch)
        ctx.Launch.launch = shield(lambda cmd, stream=None: self.on_prepared(orig_prepared, cmd, stream),
                                   ctx.Launch.launch)  # fmt: skip
        for name in ("CpuDefaultAllocator", "CpuPinnedAllocator", "CudaDefaultAllocator", "CudaMempoolAllocator",
                     "CudaManagedAllocator"):  # fmt: skip
            cls = getattr(ctx, name, None)
            if cls is not None:
                cls.deallocate = lambda alloc, ptr, size, _orig=cls.deallocate: self.on_deallocate(_orig, alloc, ptr, size)
        install_adjoint_hook(wp)
        self.cut_chain.install(wp, _as_program)

    def shield(self, hook: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
        """The hook as the program calls it: the program's own errors reach the program unchanged; an
        error of the probe ends the run with "could not verify" instead of breaking the program."""

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return hook(*args, **kwargs)
            except _ProgramError as exc:
                raise exc.error.with_traceback(exc.error.__traceback__) from None
            except Exception as exc:  # noqa: BLE001 - any probe failure is one "could not verify" line
                self.internal_failure(exc)
                raise  # not reached: internal_failure ends the process

        call.__wrapped__ = original  # type: ignore[attr-defined]
        call.__name__ = getattr(original, "__name__", "hook")
        call.__doc__ = getattr(original, "__doc__", None)
        return call

    def internal_failure(self, exc: BaseException) -> None:
        tb = traceback.extract_tb(exc.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb) if f.filename.startswith(program_sites.SKIP_DIRS[1])),
                     "")  # fmt: skip
        self.error = f"internal error in the probe: {type(exc).__name__}: {exc}" + (f" ({where})" if where else "")
        self.finish("internal-error")






def _write_error(out_path: str, error: str) -> None:
    with open(out_path + ".tmp", "w") as f:
        json.dump({"backwards": [], "findings": [], "error": error, "stopped": "probe"}, f)
    os.replace(out_path + ".tmp", out_path)


def bootstrap() -> None:
    """Start the probe inside the program's own interpreter (called by the sitecustomize the runner
    puts on PYTHONPATH): hook Warp, then let the interpreter run the program as the command says.

    The result is written when the probe stops tracing (verify never runs a whole training) or at
    exit. Children of the program do not inherit the probe.
    """
    out_path = os.environ.pop(ENV_OUT, None)
    device = os.environ.pop(ENV_DEVICE, None)
    probe_dir = os.environ.pop(ENV_PATH, None)
    fd_floor = os.environ.pop(ENV_FD_FLOOR, None)
    if probe_dir:
        parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != probe_dir]
        if parts:
            os.environ["PYTHONPATH"] = os.pathsep.join(parts)
        else:
            os.environ.pop("PYTHONPATH", None)
    if not out_path:
        return
    started = time.perf_counter()
    try:
        import warp as wp  # noqa: PLC0415
    except Exception as exc:  # noqa: BLE001 - reported as one line
        _write_error(out_path, f"the program's interpreter {sys.executable} cannot load the probe: "
                               f"{type(exc).__name__}: {exc}")  # fmt: skip
        os._exit(0)
    program_sites.locate_dirs()
    tracer = Tracer(out_path, os.getcwd())
    tracer.started = started  # the program's own time (FD's budget) counts from the interpreter's start-up
    if fd_floor:
        tracer.fd_floor = float(fd_floor)
    tracer.gradients = Gradients.from_environment()
    try:
        if device:
            wp.init()
            wp.set_device(device)
    except Exception as exc:  # noqa: BLE001
        tracer.error = f"cannot use device {device!r}: {exc}"
        tracer.finish("device")
    try:
        tracer.install()
    except Exception as exc:  # noqa: BLE001
        tracer.error = f"the probe cannot start in {sys.executable}: {type(exc).__name__}: {exc}"
        tracer.finish("probe")
    tracer.seconds["startup"] = time.perf_counter() - started
    previous_hook = sys.excepthook

    def excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if tracer.mode != "done" and tracer.error is None:
            text = "".join(traceback.format_exception(kind, exc, tb)[-6:])
            tracer.error = f"the program crashed: {kind.__name__}: {exc}\n{text}"
        previous_hook(kind, exc, tb)

    sys.excepthook = excepthook
    atexit.register(tracer.at_exit)
