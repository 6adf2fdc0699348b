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
  ``.grad`` was read before it (WF302/WF304, :mod:`.early_grad`);
* stops the program when window 1 ends (a parameter is written from gradient data, a backward
  reads none of the window's parameters), or at a cap: verify never runs a whole training.
"""

from __future__ import annotations

import atexit
import inspect
import json
import math
import os
import runpy
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

# relative imports only: this package is also copied alone onto the program's PYTHONPATH
from .adjoint import check_custom_adjoints
from .adjoint import install_hook as install_adjoint_hook
from .cut_chain import CutChain
from .early_grad import EarlyGrad
from .fd import FiniteDifferences
from .flag_trust import FlagTrust
from .leftovers import Leftovers
from .records import (
    NO_LEAF_ERROR,
    ArrayInfo,
    BackwardRecord,
    Objective,
    Op,
    PendingCompare,
    ProbeGraph,
    digest,
    family,
    flat,
)
from .spans import SpanIndex, mem_range, overlap

ENV_OUT = "WARPFIX_VERIFY_OUT"
ENV_DEVICE = "WARPFIX_VERIFY_DEVICE"
#: The folder holding the probe package and its sitecustomize (removed from the program's children).
ENV_PATH = "WARPFIX_VERIFY_PATH"

#: The window is cut after this many operations.
OP_CAP = 20000
#: ... or this many backward calls.
BACKWARD_CAP = 32

#: Warp's native routines that read and write arrays without a launch (scans, sorts, sparse assembly):
#: traced and replayed like launches, their arrays found by the pointers they are passed.
NATIVE_ROUTINES = tuple(
    f"wp_{name}_{where}"
    for name in (
        *(f"array_scan_{t}" for t in ("int", "int64", "float", "double")),
        *(f"radix_sort_pairs_{t}" for t in ("int", "int64", "uint", "uint64", "float", "double")),
        *(f"segmented_sort_pairs_{t}" for t in ("int", "float")),
        "runlength_encode_int",
        *(f"array_{op}_{t}" for op in ("sum", "inner") for t in ("float", "double")),
        "bsr_matrix_from_triplets", "bsr_compress_inplace", "bsr_transpose",
    )
    for where in ("host", "device")
)

#: Frames in these folders are never the program's: Warp itself, this probe, runpy.
_SKIP_DIRS: tuple[str, ...] = ()
#: Installed libraries and the standard library: a call site there is a library line.
_LIBRARY_DIRS: tuple[str, ...] = ()


def _skip_dirs() -> tuple[str, ...]:
    import warp  # noqa: PLC0415

    here = Path(__file__).resolve().parent
    return tuple(
        os.path.join(str(d), "")
        for d in (Path(warp.__file__).resolve().parent, here, Path(runpy.__file__).resolve().parent / "runpy.py")
    )


def _library_dirs() -> tuple[str, ...]:
    import site  # noqa: PLC0415
    import sysconfig  # noqa: PLC0415

    paths = sysconfig.get_paths()
    dirs = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # old virtualenvs ship a site module without these
        pass
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


_REAL: dict[str, str] = {}


def _real(path: str) -> str:
    out = _REAL.get(path)
    if out is None:
        out = _REAL[path] = os.path.realpath(path)
    return out


def _is_library(path: str) -> bool:
    return path.startswith(_LIBRARY_DIRS) or "/site-packages/" in path or "/dist-packages/" in path


class Tracer(FiniteDifferences):
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
        self.ops: list[Op] = []
        self.arrays: dict[int, ArrayInfo] = {}
        self.spans = SpanIndex()  # the window's arrays (ArrayInfo) by the memory they span
        self.deferred_frees: list[tuple[Callable[..., Any], Any, int, int]] = []
        self.grads: dict[int, Any] = {}  # id(grad array) -> grad array (kept alive)
        self.grad_spans = SpanIndex()  # the same gradients by the memory they span
        self.tape_since: dict[int, int] = {}  # id(tape) -> op index of its last reset
        self.backwards: list[dict[str, Any]] = []
        self.verified: list[BackwardRecord] = []
        self.window_params: list[ArrayInfo] = []
        self.findings: list[dict[str, Any]] = []
        self._finding_keys: dict[tuple, dict[str, Any]] = {}
        self.flags: dict[int, list[tuple[str, bool, bool]] | None] = {}
        self.flag_trust = FlagTrust()  # whether a kernel's write flags name every array it writes
        self.codegen_warnings: dict[str, list[str]] = {}  # kernel name -> in-kernel tracker warnings
        self.tracker_read: set[int] = set()
        self.host_grad_read = False
        # id -> (array, site, op count) of requires_grad arrays the program reads on the host
        self.host_reads: dict[int, tuple[Any, str, int]] = {}
        self.error: str | None = None
        self.stopped = ""
        self.orig: dict[str, Any] = {}
        self.signatures: dict[str, inspect.Signature] = {}
        self.aliases: dict[int, tuple[Any, Any]] = {}
        self.taped_kernels: dict[int, Any] = {}
        self.fd_seconds = 0.0
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
        self.seconds: dict[str, float] = {"trace": 0.0, "integrity": 0.0, "fd": 0.0}  # where the probe's time goes
        self.cut_chain = CutChain(self, _SKIP_DIRS[0] if _SKIP_DIRS else "\0")  # WF201: arrays without a gradient
        self.early_grad = EarlyGrad(self)  # WF302/WF304: a gradient read before its backward
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

    def site(self) -> tuple[str, int]:
        """(path relative to cwd, line) of the innermost user frame: where the program called Warp
        (for a replayed graph: where the captured call was made)."""
        if self.forced_site is not None:
            return self.forced_site[0], self.forced_site[1]
        frame = self.user_frame()
        if frame is None:
            return "<unknown>", 0
        return self.relpath(frame.f_code.co_filename), frame.f_lineno

    def library_site(self) -> str | None:
        """``path:line`` of the innermost library frame that called Warp, when it is not the program's."""
        if self.forced_site is not None:
            return self.forced_site[2]
        frame = sys._getframe(1)
        while frame is not None:
            fn = frame.f_code.co_filename
            if not fn.startswith("<") and not _real(fn).startswith(_SKIP_DIRS):
                if self.is_program(fn):
                    return None
                return f"{self.relpath(fn)}:{frame.f_lineno}"
            frame = frame.f_back
        return None

    def is_program(self, filename: str) -> bool:
        """True for the program's own files: outside Warp, this probe and installed libraries, or in
        the folder of the ``__main__`` file (an example run from inside a package)."""
        known = self.program_files.get(filename)
        if known is None:
            known = self.program_files[filename] = self._is_program(filename)
        return known

    def _is_program(self, filename: str) -> bool:
        real = _real(filename)
        if self.main_dir is None:
            main_file = getattr(sys.modules.get("__main__"), "__file__", None)
            if main_file:
                self.main_dir = os.path.join(os.path.dirname(_real(main_file)), "")
                self.program_files.clear()
        if self.main_dir is not None and real.startswith(self.main_dir) and not real.startswith(_SKIP_DIRS[1:]):
            return True  # an example run from inside an installed package (warp/examples, newton/examples)
        if real.startswith(_SKIP_DIRS):
            return False
        return not _is_library(real)

    def user_frame(self) -> Any:
        frame = sys._getframe(1)
        while frame is not None:
            fn = frame.f_code.co_filename
            if not fn.startswith("<") and self.is_program(fn):
                return frame
            frame = frame.f_back
        return None

    def relpath(self, path: str) -> str:
        out = self.relpaths.get(path)
        if out is None:
            out = self.relpaths[path] = self._relpath(path)
        return out

    def _relpath(self, path: str) -> str:
        ap = os.path.abspath(path)
        try:
            rel = os.path.relpath(ap, self.cwd)
        except ValueError:
            return ap
        return ap if rel.startswith("..") else rel

    def add_finding(
        self, rule: str, path: str, line: int, message: str, key: tuple, *, classified_as: str | None = None,
        library: str | None = None, **data: Any,
    ) -> None:
        """Record a finding once per ``key``; a repeat (the same launch, another element of the same
        array family, a later step of the loop) only counts."""
        known = self._finding_keys.get(key)
        if known is not None:
            known["data"]["count"] = known["data"].get("count", 1) + 1
            return
        finding: dict[str, Any] = {"rule": rule, "path": path, "line": line, "message": message, "data": data,
                                   "classified_as": classified_as}  # fmt: skip
        if classified_as == "WF103":
            finding["severity"] = "error"  # one object as input and output of a taped launch: never intended
        if library and library != f"{path}:{line}":
            lib_path, _, lib_line = library.rpartition(":")
            finding["related"] = [{"path": lib_path, "line": int(lib_line), "message": "the library line that called Warp"}]
        self._finding_keys[key] = finding
        self.findings.append(finding)

    # ----------------------------------------------------------------- arrays
    def is_array(self, v: Any) -> bool:
        return isinstance(v, self.wp.array)

    def name_of(self, arr: Any, frame: Any) -> str | None:
        """The user's name for ``arr`` in ``frame``: a variable, ``obj.attr`` or ``seq[i]``."""
        if frame is not None:
            for scope in (frame.f_locals, frame.f_globals):
                for name, val in scope.items():
                    if val is arr:
                        return name
                for name, val in scope.items():
                    if name.startswith("__") or inspect.ismodule(val) or inspect.isclass(val):
                        continue
                    if isinstance(val, (list, tuple)):
                        for i, item in enumerate(val[:64]):
                            if item is arr:
                                return f"{name}[{i}]"
                    attrs = getattr(val, "__dict__", None)
                    if isinstance(attrs, dict):
                        for attr, item in attrs.items():
                            if item is arr:
                                return f"{name}.{attr}"
                            if isinstance(item, self.wp._src.codegen.StructInstance):
                                for path, held in self.struct_arrays(item):
                                    if held is arr:
                                        return f"{name}.{attr}.{path}"
        return None

    def touch(self, arr: Any, frame: Any, label: str = "") -> ArrayInfo:
        info = self.arrays.get(id(arr))
        if info is not None and info.arr is arr:
            if not info.label:
                info.label = label
            return info
        with self.paused():
            snap = self.wp.clone(arr, requires_grad=False)
            h = digest(arr)
        order = len(self.arrays)
        name = (self.name_of(arr, frame) if arr.requires_grad else None) or f"array#{order}{list(arr.shape)}"
        info = ArrayInfo(arr=arr, order=order, snap=snap, name=name, hash=h, span=mem_range(arr), label=label)
        with self.paused():
            over = list(self.spans.overlapping(info.span))
            written = [other for other in over if other.writes_at]
            # what a replay leaves in this memory: the last traced write to it (else the arrays' snapshots)
            judged = [max(written, key=lambda other: other.writes_at[-1])] if written else over
            if judged and all(other.hash != digest(other.arr) for other in judged):
                # the memory holds contents no traced operation left there: the program wrote it outside the
                # trace (a warp.fem temporary lent again, then zeroed); a replay must find here what the
                # program found, not what the earlier arrays' operations leave
                info.reset_at = len(self.ops)
        self.spans.add(info.span, info)
        self.hold(arr)
        # a gradient, or a view of one (`x.grad.flatten()` handed to an optimizer)
        info.is_grad = (id(arr) in self.grads and self.grads[id(arr)] is arr) or (
            arr.deleter is None and self.grad_spans.any_overlap(info.span)
        )
        info.tainted = info.is_grad
        self.arrays[id(arr)] = info
        if arr.requires_grad and arr.grad is not None and self.grads.get(id(arr.grad)) is not arr.grad:
            self.grads[id(arr.grad)] = arr.grad
            self.grad_spans.add(mem_range(arr.grad), arr.grad)
        return info

    def hold(self, arr: Any) -> None:
        """Keep ``warp.fem``'s temporaries the probe holds out of their pool while it may replay them.

        A fem temporary's ``release()`` gives its memory back at once (to the allocator, or to a
        ``TemporaryStore`` that lends it to the next borrower) though the array object lives on; the
        probe's snapshots and replays would then use memory that is free or another array's. While the
        probe works such a release is deferred: the memory goes when the array is garbage collected,
        as Warp does for temporaries under a tape.
        """
        while self.is_array(arr):
            release = vars(arr).get("release")
            if release is not None and not getattr(release, "held_by_probe", False):

                def deferred(_release: Callable[[], Any] = release) -> Any:
                    return _release() if self.mode == "done" else None

                deferred.held_by_probe = True  # type: ignore[attr-defined]
                arr.release = deferred
            arr = getattr(arr, "_ref", None)

    def on_deallocate(self, orig: Callable[..., Any], allocator: Any, ptr: int, size: int) -> None:
        """Free device memory, unless the window holds arrays in it: those frees wait until the window
        is dropped (views made with ``ptr=`` do not keep their owner alive, and the probe replays them)."""
        if self.mode != "done" and self.spans.starts_within(ptr, ptr + size):
            self.deferred_frees.append((orig, allocator, ptr, size))
        else:
            orig(allocator, ptr, size)

    def drop_arrays(self) -> None:
        """Forget the window's arrays and free the memory kept for them."""
        self.arrays = {}
        self.spans = SpanIndex()
        frees, self.deferred_frees = self.deferred_frees, []
        for orig, allocator, ptr, size in frees:
            orig(allocator, ptr, size)

    def tracked(self, arr: Any) -> bool:
        """True for arrays of the window: touched before, a traced gradient, a view/alias of one, or the owner
        of a traced view (warp.sparse traces a matrix's ``scalar_values`` view, then copies and zeroes the
        ``values`` array that owns that memory: untraced, the replay would hold those values constant)."""
        info = self.arrays.get(id(arr))
        if (info is not None and info.arr is arr) or self.grads.get(id(arr)) is arr:
            return True
        return self.spans.any_overlap(mem_range(arr))

    def freeze(self, v: Any) -> Any:
        """A copy of a launch argument that later host-side changes cannot reach (arrays by reference)."""
        import ctypes  # noqa: PLC0415

        wp = self.wp
        if self.is_array(v) or v is None or isinstance(v, (int, float, bool, str)):
            return v
        if isinstance(v, wp._src.codegen.StructInstance):
            out = v._cls()
            for name in v._cls.vars:
                setattr(out, name, self.freeze(getattr(v, name)))
            return out
        if isinstance(v, ctypes.Array | ctypes.Structure) or isinstance(v, ctypes._SimpleCData):
            return type(v).from_buffer_copy(v)
        if isinstance(v, np.ndarray):
            return v.copy()
        return v

    def struct_arrays(self, v: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """(field path, array) of the arrays a struct holds, nested structs included."""
        for name in v._cls.vars:
            f = getattr(v, name)
            if self.is_array(f):
                yield prefix + name, f
            elif isinstance(f, self.wp._src.codegen.StructInstance):
                yield from self.struct_arrays(f, f"{prefix}{name}.")

    # ----------------------------------------------------------------- kernel flags (Warp's tracker)
    def kernel_flags(self, kernel: Any) -> list[tuple[str, bool, bool]] | None:
        """Warp's own per-argument (label, is_read, is_write) flags, from code generation only."""
        key = id(kernel)
        if key in self.flags:
            return self.flags[key]
        wp = self.wp
        ctx = wp._src.context
        codegen = wp._src.codegen
        flags: list[tuple[str, bool, bool]] | None = None
        if not kernel.is_generic:
            module = kernel.module
            opts = dict(module.options)
            opts["verify_autograd_array_access"] = True
            captured: list[str] = []
            saved_log = codegen.log_warning
            saved_opt = codegen.options.get("verify_autograd_array_access")
            codegen.log_warning = captured.append
            codegen.options["verify_autograd_array_access"] = True
            live = module._get_live_kernels()
            saved_hashes = [(k, getattr(k, "hash", None)) for k in live]  # the analysis build re-hashes them
            try:
                hasher = ctx.ModuleHasher(live, opts)
                ctx.ModuleBuilder(module, opts, hasher=hasher, target=None)
                flags = [(a.label, bool(a.is_read), bool(a.is_write)) for a in kernel.adj.args]
                for k in live:
                    self.flags.setdefault(id(k), [(a.label, bool(a.is_read), bool(a.is_write)) for a in k.adj.args])
            except Exception:  # noqa: BLE001 - flags are an optimisation; fall back to hashing
                flags = None
            finally:
                for k, h in saved_hashes:
                    k.hash = h
                codegen.log_warning = saved_log
                if saved_opt is None:
                    codegen.options.pop("verify_autograd_array_access", None)
                else:
                    codegen.options["verify_autograd_array_access"] = saved_opt
            for msg in captured:
                for k in module._get_live_kernels():
                    if f"in kernel {k.adj.fun_name} " in msg or f"kernel {k.key} " in msg:
                        self.codegen_warnings.setdefault(k.adj.fun_name, []).append(msg)
        self.flags[key] = flags
        return flags

    # ----------------------------------------------------------------- recording
    def record(self, op: Op) -> None:
        idx = op.index
        for info in op.reads:
            if info.first_read is None:
                info.first_read = idx
        # gradient data reaches this op: a traced gradient or what was computed from one, or host data made
        # after the host read a gradient (``x.assign(...)``; ``step = wp.array(g_np * s)`` read here first)
        tainted_in = any(i.tainted or i.is_grad for i in op.reads) or self.host_grad_read and (
            op.kind == "assign" or any(i.first_read == idx and not i.writes_at for i in op.reads))
        end_window = False
        for info in op.writes:
            info.writes_at.append(idx)
            if op.tape is not None:
                info.taped_write = True
            if info.first_read is not None and info.first_read < idx:
                if self.is_param_candidate(info) and tainted_in and self.verified:
                    end_window = True
                    info.trained = True
                info.written_after_read = True
            if tainted_in:
                info.tainted = True
            if tainted_in and self.verified and info.arr.deleter is None:
                # an optimizer writing a parameter through a view (`Adam([w.flatten()])`)
                for leaf in self.window_params:
                    if leaf is not info and not leaf.trained and overlap(leaf.span, info.span):
                        leaf.trained = end_window = True
        self.ops.append(op)
        if end_window:
            self.end_window()
        elif len(self.ops) >= OP_CAP:
            self.finish("cap")

    def is_param_candidate(self, info: ArrayInfo) -> bool:
        arr = info.arr
        return (
            bool(arr.requires_grad)
            and arr.grad is not None
            and not info.is_grad
            and not info.taped_write
            and info.first_read is not None
            and arr.size > 0
            and self.wp._src.types.type_scalar_type(arr.dtype) in (self.wp.float32, self.wp.float64)
        )

    def array_args(self, values: list[Any], labels: list[str] | None = None) -> list[tuple[Any, int | None, str]]:
        """(array, argument position or None inside a struct, argument label) of launch arguments."""
        out: list[tuple[Any, int | None, str]] = []
        for i, v in enumerate(values):
            label = labels[i] if labels and i < len(labels) else f"argument {i}"
            if self.is_array(v):
                out.append((v, i, label))
            elif isinstance(v, self.wp._src.codegen.StructInstance):
                out.extend((a, None, f"{label}.{name}") for name, a in self.struct_arrays(v))
        return out

    def traced_op(
        self,
        kind: str,
        label: str,
        tape: Any,
        arrays: list[tuple[Any, bool, bool, str, int | None]],
        run: Callable[[], Any],
        replay: Callable[[], None],
        read_only: frozenset[int] = frozenset(),
    ) -> Any:
        """Run one operation and record it. ``arrays``: (array, may_read, known_write, label, position)
        of its array arguments; a write the caller does not know of is found by a change of contents,
        except for arrays in ``read_only`` (ids the kernel's own code never writes). Each array is hashed
        once before (when it may be read, or written unknowingly) and once after (unless read-only)."""
        if not self.natives_hooked:
            self.hook_natives()
        with self.paused():
            self.leftovers.read([a for a, may_read, *_ in arrays if may_read], self.site)
        if tape is None and not any(self.tracked(a) or (r and a.requires_grad) for a, r, *_ in arrays):
            # initialises fresh arrays from untraced data (allocation internals, constant setup): the
            # result is a constant of the window, captured by the snapshot at the next touch
            return run()
        started = time.perf_counter()
        if tape is not None and self.tape_start is None and self.window == 0:
            self.checkpoint()
        frame = self.user_frame()
        path, line = self.site()
        infos = [(self.touch(a, frame, lab), r, w, lab, pos) for a, r, w, lab, pos in arrays]
        pre: dict[int, int] = {}
        with self.paused():
            for info, may_read, known_write, *_ in infos:
                if id(info) not in pre and (may_read or not known_write):
                    pre[id(info)] = digest(info.arr)
        self.depth += 1
        self.seconds["trace"] += time.perf_counter() - started
        try:
            result = run()
        finally:
            self.depth -= 1
        started = time.perf_counter()
        reads: list[ArrayInfo] = []
        writes: list[ArrayInfo] = []
        read_hash: dict[int, int] = {}
        positions: dict[int, list[tuple[int | None, bool, bool]]] = {}
        post_of: dict[int, int] = {}
        with self.paused():
            for info, may_read, known_write, _, pos in infos:
                post = post_of.get(id(info))
                if post is None:
                    unchanged = id(info.arr) in read_only and id(info) in pre
                    post = post_of[id(info)] = pre[id(info)] if unchanged else digest(info.arr)
                written = known_write or post != pre.get(id(info), post)
                positions.setdefault(info.order, []).append((pos, may_read, known_write))
                if written and info not in writes:
                    writes.append(info)
                if may_read and info not in reads:
                    reads.append(info)
                    read_hash[info.order] = pre[id(info)]
                info.hash = post
            # other views over the memory written hold traced contents too (one column of a wider buffer)
            for info in writes:
                for other in self.spans.overlapping(info.span):
                    if other is not info and id(other) not in post_of:
                        other.hash = digest(other.arr)
        op = Op(len(self.ops), kind, label, path, line, tape, replay, reads, writes, read_hash,
                positions=positions, library=self.library_site(), replayed=self.replaying is not None,
                recording=self.wp._src.context.runtime.tape)  # fmt: skip
        self.seconds["trace"] += time.perf_counter() - started
        self.record(op)
        return result

    def checkpoint(self) -> None:
        """Keep the contents of every array of window 0 where its first tape begins: its FD replays start
        there (the program's set-up before it, e.g. a model built in ``__init__``, is not part of the
        iteration). Window 1 starts after an optimizer step and is one iteration: replayed whole, so that
        forward work the program does before its tape (untaped launches) is judged too."""
        with self.paused():
            self.tape_state = {i.order: self.wp.clone(i.arr, requires_grad=False) for i in self.arrays.values()}
        self.tape_start = len(self.ops)

    def hook_natives(self) -> None:
        """Trace Warp's native array routines (see NATIVE_ROUTINES) once Warp's runtime is loaded."""
        runtime = self.wp._src.context.runtime
        core = getattr(runtime, "core", None)
        if core is None:
            return
        self.natives_hooked = True
        for name in NATIVE_ROUTINES:
            try:
                fn = getattr(core, name)
            except AttributeError:  # not in this Warp build
                continue
            program_fn = _as_program(fn)
            hook = self.shield(lambda *a, _fn=program_fn, _name=name: self.on_native(_fn, _name, a), fn)
            setattr(core, name, hook)

    def on_native(self, orig: Callable[..., Any], name: str, args: tuple) -> Any:
        """A native routine on arrays of the window: an operation of the window (replayed with the same
        pointers; writes are found by content)."""
        if not (self.hooked() and self.tracing()):
            return orig(*args)
        pointers = [(pos, _pointer(arg)) for pos, arg in enumerate(args)]
        arrays = [(arr, True, False, f"argument {pos}", pos) for pos, ptr in pointers for arr in self.arrays_at(ptr)]
        if not arrays:
            return orig(*args)
        # the routine's other buffers (fresh outputs) are the caller's arrays: traced too, so that their
        # memory stays the routine's when it is replayed
        found = {pos for _, _, _, _, pos in arrays}
        callers = self.caller_arrays()
        for pos, ptr in pointers:
            if pos not in found and ptr:
                arrays += [(arr, True, False, f"argument {pos}", pos) for arr in callers if arr.ptr == ptr]
        return self.traced_op("native", f"native {name.removeprefix('wp_')}", None, arrays,
                              lambda: orig(*args), lambda: orig(*args))  # fmt: skip

    def caller_arrays(self) -> list[Any]:
        """Arrays the Python callers of a native routine hold (locals, and their attributes: a BSR matrix)."""
        out: list[Any] = []
        frame = sys._getframe(1)
        for _ in range(6):
            if frame is None:
                break
            if not _real(frame.f_code.co_filename).startswith(_SKIP_DIRS[1:2]):  # not the probe's own frames
                for val in list(frame.f_locals.values()):
                    if self.is_array(val):
                        out.append(val)
                    elif hasattr(val, "__dict__") and not inspect.ismodule(val) and not inspect.isclass(val):
                        out += [v for v in vars(val).values() if self.is_array(v)]
            frame = frame.f_back
        return out

    def arrays_at(self, ptr: int | None) -> list[Any]:
        """The window's arrays whose memory holds the address ``ptr``."""
        if not ptr:
            return []
        return [i.arr for i in self.spans.at_address(ptr)]

    # ----------------------------------------------------------------- hooks
    def hooked(self) -> bool:
        """True for a call the program made (not one made by Warp inside another hooked call, nor by the probe)."""
        return self.enabled and self.depth == 0 and self.mode != "done"

    def on_prepared(self, orig: Callable, cmd: Any, stream: Any) -> Any:
        """``Launch.launch()`` of a prepared launch (``wp.launch(..., record_cmd=True)``, as warp.optim's
        solvers use): traced as the launch of its kernel with its current arguments."""
        if not (self.hooked() and self.tracing()) or cmd.adjoint or cmd.fwd_args is None:
            return orig(cmd, stream)
        kwargs = {"inputs": list(cmd.fwd_args), "device": cmd.device, "record_tape": False,
                  "max_blocks": cmd.max_blocks, "block_dim": cmd.block_dim}  # fmt: skip
        if stream is not None:
            kwargs["stream"] = stream
        return self.on_launch(self.orig["launch"], (cmd.kernel, tuple(cmd.bounds.shape)), kwargs)

    def on_launch(self, orig: Callable, args: tuple, kwargs: dict, as_tape: Any = None) -> Any:
        if not self.hooked():
            return orig(*args, **kwargs)
        a = self.signatures["launch"].bind(*args, **kwargs).arguments
        if a.get("adjoint") or a.get("record_cmd"):
            return orig(*args, **kwargs)
        kernel = a["kernel"]
        inputs = list(a.get("inputs", []) or [])
        outputs = list(a.get("outputs", []) or [])
        runtime = self.wp._src.context.runtime
        taped = as_tape is not None or (runtime.tape is not None and a.get("record_tape", True))
        tape = as_tape if as_tape is not None else (runtime.tape if taped else None)
        fi = [self.freeze(v) for v in inputs]
        fo = [self.freeze(v) for v in outputs]
        dim, device = a["dim"], a.get("device")
        max_blocks, block_dim = a.get("max_blocks", 0), a.get("block_dim")
        if self.capture is not None:
            frozen = {"inputs": fi, "outputs": fo, "device": device, "record_tape": False, "max_blocks": max_blocks}
            if block_dim is not None:
                frozen["block_dim"] = block_dim
            self.capture_event(lambda: self.on_launch(orig, (kernel, dim), frozen, as_tape=tape))
            self.capture_save([arr for arr, _, _ in self.array_args(inputs + outputs)])
        if not self.tracing():
            return orig(*args, **kwargs)
        flags = self.kernel_flags(kernel)
        if taped:
            self.taped_kernels[id(kernel)] = kernel

        cmd: list[Any] = []

        def replay() -> None:
            # a prepared launch (arguments packed once) keeps replays cheap
            if not cmd:
                cmd.append(orig(kernel, dim, inputs=fi, outputs=fo, device=device, record_tape=False,
                                max_blocks=max_blocks, block_dim=block_dim, record_cmd=True))  # fmt: skip
            if cmd[0] is not None:
                cmd[0].launch()

        arrays: list[tuple[Any, bool, bool, str, int | None]] = []
        all_args = inputs + outputs
        labels = [f[0] for f in flags] if flags else [a.label for a in kernel.adj.args]
        unwritten: set[int] = set()  # arrays only passed where the kernel never stores
        written_ids: set[int] = set()
        for arr, pos, label in self.array_args(all_args, labels):
            if pos is None:
                arrays.append((arr, True, False, label, None))
                written_ids.add(id(arr))
                continue
            is_read, is_write = (flags[pos][1], flags[pos][2]) if flags and pos < len(flags) else (True, False)
            known_write = is_write or pos >= len(inputs)
            (unwritten if flags and pos < len(flags) and not is_write else written_ids).add(id(arr))
            # Warp's read flag misses `a[i] * b` reads: only "written and not flagged read" means write-only
            arrays.append((arr, not (is_write and not is_read), known_write, label, pos))
        if taped and flags:
            self.mirror_tracker(kernel, all_args, flags)
        unflagged = frozenset(unwritten - written_ids)
        known = len(self.ops)
        result = self.traced_op("launch", f"launch of kernel {kernel.key}", tape, arrays, lambda: orig(*args, **kwargs),
                                replay, self.flag_trust.read_only(kernel, unflagged))  # fmt: skip
        if len(self.ops) > known:
            self.flag_trust.learn(kernel, unflagged, self.ops[known].writes)
        return result

    def mirror_tracker(self, kernel: Any, args: list[Any], flags: list[tuple[str, bool, bool]]) -> None:
        """Warp's `verify_autograd_array_access` check, on the recorded launch, attributed to its call site."""
        path, line = self.site()
        library = self.library_site()
        name = kernel.adj.fun_name
        for msg in self.codegen_warnings.pop(name, []):
            self.add_finding("WF905", path, line, f"Warp overwrite tracker: {msg}", ("WF905", path, line, name, msg),
                             classified_as="WF106", library=library, kernel=name)  # fmt: skip
        read_here = {id(v) for i, v in enumerate(args) if self.is_array(v) and i < len(flags) and flags[i][1]}
        for i, v in enumerate(args):
            if not self.is_array(v) or i >= len(flags):
                continue
            label, is_read, is_write = flags[i]
            if is_write and id(v) in self.tracker_read:
                aliased = any(v is w and j != i for j, w in enumerate(args)) and id(v) in read_here
                if aliased:
                    msg = (
                        f"argument `{label}` of kernel `{name}` is written here while the same array is also "
                        "passed as an input of this launch (one object as input and output state)"
                    )
                else:
                    msg = (
                        f"argument `{label}` of kernel `{name}` is written here but the array was already read "
                        "by an earlier launch on the tape; the earlier launch's adjoint will see the new values"
                    )
                self.add_finding("WF905", path, line, f"Warp overwrite tracker: {msg}",
                                 ("WF905", path, line, name, label), classified_as="WF103" if aliased else "WF104",
                                 library=library, kernel=name, argument=label)  # fmt: skip
            if is_read:
                self.tracker_read.add(id(v))

    def on_copy(self, orig: Callable, args: tuple, kwargs: dict, as_tape: Any = None) -> Any:
        if not self.hooked():
            return orig(*args, **kwargs)
        a = self.signatures["copy"].bind(*args, **kwargs).arguments
        dest, src = a["dest"], a["src"]
        if not (self.is_array(dest) and self.is_array(src)):
            return orig(*args, **kwargs)
        dest_offset, src_offset, count = a.get("dest_offset", 0), a.get("src_offset", 0), a.get("count", 0)
        runtime = self.wp._src.context.runtime
        taped = as_tape is not None or (runtime.tape is not None and src.grad is not None and dest.grad is not None)
        tape = as_tape if as_tape is not None else (runtime.tape if taped else None)
        if self.capture is not None:
            frozen = {"dest_offset": dest_offset, "src_offset": src_offset, "count": count}
            self.capture_event(lambda: self.on_copy(orig, (dest, src), frozen, as_tape=tape))
            self.capture_save([dest])
        if not self.tracing():
            return orig(*args, **kwargs)
        d_alias, s_alias = self.nograd(dest), self.nograd(src)

        def replay() -> None:
            orig(d_alias, s_alias, dest_offset=dest_offset, src_offset=src_offset, count=count)

        if taped:
            path, line = self.site()
            if id(dest) in self.tracker_read:
                msg = "an array copy writes an array already read by an earlier launch on the tape"
                self.add_finding("WF905", path, line, f"Warp overwrite tracker: {msg}", ("WF905", path, line, "copy"),
                                 classified_as="WF101", library=self.library_site())  # fmt: skip
            self.tracker_read.add(id(src))
        arrays = [(src, True, False, "src", 1), (dest, False, True, "dest", 0)]
        return self.traced_op("copy", "wp.copy", tape, arrays, lambda: orig(*args, **kwargs), replay)

    def nograd(self, arr: Any) -> Any:
        """An alias of ``arr``'s memory without a gradient (so a replayed copy leaves .grad alone)."""
        if arr.grad is None:
            return arr
        alias = self.aliases.get(id(arr))
        if alias is None or alias[0] is not arr:
            view = self.wp.array(ptr=arr.ptr, dtype=arr.dtype, shape=arr.shape, strides=arr.strides, device=arr.device)
            alias = self.aliases[id(arr)] = (arr, view)
        return alias[1]

    def on_assign(self, orig: Callable, arr: Any, src: Any) -> Any:
        if not self.hooked():
            return orig(arr, src)
        if self.is_array(src):
            # array.assign(array) is a wp.copy (recorded and differentiable): trace it as one
            return self.wp.copy(arr, src)
        frozen = self.wp.array(np.array(src, copy=True), dtype=arr.dtype, device="cpu")
        if self.capture is not None:
            self.capture_event(lambda: self.on_assign(orig, arr, frozen))
            self.capture_save([arr])
        if not self.tracing():
            return orig(arr, src)
        alias = self.nograd(arr)

        def replay() -> None:
            self.orig["copy"](alias, frozen)

        return self.traced_op("assign", "array.assign", None, [(arr, False, True, "array", None)],
                              lambda: orig(arr, src), replay)  # fmt: skip

    def on_fill(self, orig: Callable, kind: str, arr: Any, *value: Any) -> Any:
        if not self.hooked():
            return orig(arr, *value)
        frozen = tuple(self.freeze(v) for v in value)
        if self.capture is not None:
            self.capture_event(lambda: self.on_fill(orig, kind, arr, *frozen))
            self.capture_save([arr])
        if not self.tracing():
            return orig(arr, *value)
        self.tracker_read.discard(id(arr))

        def replay() -> None:
            orig(arr, *frozen)

        return self.traced_op(kind, f"array.{kind}_", None, [(arr, False, True, "array", None)],
                              lambda: orig(arr, *value), replay)  # fmt: skip

    # ----------------------------------------------------------------- graph capture
    def on_capture_begin(self, orig: Callable, args: tuple, kwargs: dict) -> None:
        """Graph capture under the probe records no graph: the captured calls are kept (with their
        arguments frozen) and replayed, eagerly and traced, by every ``capture_launch``. They also run
        once now, untraced, so that tapes record their launches; capture end undoes what they wrote."""
        if self.capture is not None:
            raise RuntimeError("Graph capture already in progress")
        path, line = self.site()
        self.capture = ProbeGraph(f"{path}:{line}")
        self.note(f"the graph captured at {path}:{line} runs eagerly under the probe at each capture_launch")

    def capture_event(self, call: Callable[[], Any]) -> None:
        """Keep a captured call for replay, with the program line that made it."""
        assert self.capture is not None
        path, line = self.site()
        where = (path, line, self.library_site())

        def event() -> None:
            outer, self.forced_site = self.forced_site, where
            try:
                call()
            finally:
                self.forced_site = outer

        self.capture.events.append(event)

    def capture_save(self, arrays: list[Any]) -> None:
        """Keep the pre-capture contents of arrays the captured work may write (restored at capture end)."""
        graph = self.capture
        if graph is None:
            return
        with self.paused():
            for arr in arrays:
                if id(arr) not in graph.saved and arr.ptr is not None:
                    graph.saved[id(arr)] = (arr, self.wp.clone(arr, requires_grad=False))

    def on_capture_end(self, orig: Callable, args: tuple, kwargs: dict) -> Any:
        graph, self.capture = self.capture, None
        if graph is None:
            return orig(*args, **kwargs)
        with self.paused():
            for arr, before in reversed(list(graph.saved.values())):
                self.orig["copy"](self.nograd(arr), before)
        graph.saved.clear()
        return graph

    def on_capture_launch(self, orig: Callable, graph: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(graph, ProbeGraph):
            return orig(graph, *args, **kwargs)
        graph.launches += 1
        outer, self.replaying = self.replaying, graph
        try:
            for event in graph.events:
                event()
        finally:
            self.replaying = outer
        return None

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def on_numpy(self, orig: Callable, arr: Any, *args: Any, **kwargs: Any) -> Any:
        if self.tracing():
            with self.paused():
                self.leftovers.read([arr], self.site)
            if self.grads.get(id(arr)) is arr:
                self.host_grad_read = True
                self.early_grad.on_host_read(arr)
            elif arr.requires_grad and id(arr) not in self.host_reads:
                path, line = self.site()
                self.host_reads[id(arr)] = (arr, f"{path}:{line}", len(self.ops))
        return orig(arr, *args, **kwargs)

    def on_reset(self, orig: Callable, tape: Any) -> Any:
        if self.capture is not None and self.hooked():
            self.capture_event(lambda: self.on_reset(orig, tape))
        self.tape_since[id(tape)] = len(self.ops)
        for launch in tape.launches:
            if isinstance(launch, list):
                self.tracker_read.difference_update(id(v) for v in list(launch[3]) + list(launch[4]))
        with self.paused():
            return orig(tape)

    def on_backward(self, orig: Callable, tape: Any, loss: Any = None, grads: Any = None) -> Any:
        if not self.hooked():
            return orig(tape, loss, grads)
        if self.capture is not None:
            # recorded for capture_launch; run now only so the tape is complete (undone at capture end)
            self.capture_event(lambda: self.on_backward(orig, tape, loss, grads))
            grads_of = [g for g in tape.gradients.values() if self.is_array(g)]
            for launch in tape.launches:
                if isinstance(launch, list):
                    grads_of += [a.grad for a, _, _ in self.array_args(list(launch[3]) + list(launch[4]))
                                 if a.grad is not None]  # fmt: skip
            grads_of += [a.grad for a in [loss, *(grads or {})] if self.is_array(a) and a.grad is not None]
            self.capture_save(grads_of)
            with self.paused():
                return orig(tape, loss, grads)
        path, line = self.site()
        site = f"{path}:{line}"
        if self.mode == "epilogue":
            self.check_accumulated(self.window_params, path, line, self.tape_arrays(tape))
            self.finish("window-end")
        if self.previous_params:
            # the first backward of window 1: the previous iteration's gradients must be gone
            self.check_accumulated(self.previous_params, path, line, self.tape_arrays(tape))
            self.previous_params = []
        taped_ops = [op for op in self.ops[self.tape_since.get(id(tape), 0):] if op.tape is tape]
        # a leaf: read on this tape and not written from its first read there on (host set-up before is fine)
        leaves: list[ArrayInfo] = []
        seen: set[int] = set()
        for op in taped_ops:
            for info in op.reads:
                if info.order in seen:
                    continue
                seen.add(info.order)
                if self.is_param_candidate(info) and info.arr is not loss and not any(
                    w >= op.index for w in info.writes_at
                ):
                    # perturbed where its value was last set: the window's first read, or right after the
                    # last write before this tape read it (a gradient check assigning the parameter)
                    set_at = max(info.writes_at, default=None)
                    self.leaf_read[info.order] = info.first_read if set_at is None else set_at + 1
                    leaves.append(info)
        if self.verified:
            known = {id(i) for i in self.window_params}
            with self.paused():
                host_written = [i for i in leaves if id(i) in known and digest(i.arr) != i.hash]
            if not any(id(i) in known for i in leaves) or host_written:
                # a new iteration: fresh parameters, or parameters updated on the host
                self.check_accumulated(self.window_params, path, line, {id(i.arr) for i in leaves})
                self.finish("window-end")
        frame = self.user_frame()
        for info in leaves:
            self.resolve_name(info, frame)
        started = time.perf_counter()
        known_findings = len(self.findings)
        self.check_integrity(tape, taped_ops, path, line, frame)
        integrity = [f for f in self.findings[known_findings:] if f["rule"] == "WF902"]
        self.seconds["integrity"] += time.perf_counter() - started
        if len(self.verified) >= BACKWARD_CAP or self.fd_seconds > self.fd_budget():
            self.finish("cap")
        with self.paused():
            seeds, how = self.seeds(tape, loss, grads, taped_ops, leaves)
            since = self.tape_since.get(id(tape), 0)
            self.cut_chain.check(tape, since, leaves, [a for a, _ in seeds], frame)
            self.early_grad.check(tape, since, frame)
            objective = Objective(seeds, how)
            value = objective.value()
            before = {id(i): flat(i.arr.grad.numpy()).copy() for i in leaves}
            self.leftovers.before_backward()
            result = orig(tape, loss, grads)
            self.leftovers.after_backward(tape, site, self.is_array)
            ad = {id(i): flat(i.arr.grad.numpy()) - before[id(i)] for i in leaves}
            self.tracker_read.difference_update(id(a) for op in taped_ops for a in (x.arr for x in op.reads))
            entry: dict[str, Any] = {"site": site, "loss": value, "window": self.window, "params": []}
            if how != "loss":
                entry["objective"] = how
            notes = []
            if self.capture is not None:
                notes.append(f"captured by the graph capture at {self.capture.site}: run eagerly under the probe")
            elif self.replaying is not None:
                notes.append(f"a replay of the graph captured at {self.replaying.site}")
            if not taped_ops:
                notes.append("the tape recorded no operation before this backward")
            elif not leaves:
                notes.append("no leaf parameter (a requires_grad array read on the tape and never written) "
                             "reaches the objective")  # fmt: skip
            elif not seeds:
                notes.append("the backward has no seed (no loss, no grads=, no non-zero output gradient)")
            if notes:
                entry["note"] = "; ".join(notes)
            record = BackwardRecord({})
            if taped_ops and leaves and seeds:
                job = self.plan_compare(entry, objective, leaves, ad, path, line, record)
                job.integrity = integrity
                self.pending.append(job)
        for info in leaves:
            if info not in self.window_params:
                self.window_params.append(info)
        self.verified.append(record)
        self.backwards.append(entry)
        self.flush()
        return result

    def seeds(
        self, tape: Any, loss: Any, grads: Any, taped_ops: list[Op], leaves: list[ArrayInfo]
    ) -> tuple[list[tuple[Any, np.ndarray]], str]:
        """What the backward differentiates: (array, seed) pairs of the objective sum(seed * array)."""
        if loss is not None:
            return [(loss, np.ones(1))], "loss"
        if grads:
            out = [(a, flat(g.numpy()).copy()) for a, g in grads.items() if self.is_array(a) and self.is_array(g)]
            return out, "sum(seed * output) of the grads= seeds"
        # seeded by hand: `out.grad.fill_(1.0); tape.backward()`
        out: list[tuple[Any, np.ndarray]] = []
        leaf_ids = {id(i.arr) for i in leaves}
        seen: set[int] = set()
        for op in taped_ops:
            for info in op.writes:
                arr = info.arr
                if id(arr) in seen or id(arr) in leaf_ids or arr.grad is None:
                    continue
                seen.add(id(arr))
                g = flat(arr.grad.numpy())
                if np.any(g != 0.0):
                    out.append((arr, g.copy()))
        return out, "sum(seed * output) of the gradients seeded by hand"

    # ----------------------------------------------------------------- checks
    def resolve_name(self, info: ArrayInfo, frame: Any) -> None:
        """Replace a placeholder name by the user's name for the array, if ``frame`` binds it now."""
        if info.name.startswith("array#"):
            info.name = self.name_of(info.arr, frame) or info.name

    def check_integrity(self, tape: Any, taped_ops: list[Op], path: str, line: int, frame: Any) -> None:
        """WF902: arrays a taped launch read (and did not write) must be unchanged when backward starts."""
        current: dict[int, int] = {}
        with self.paused():
            for op in taped_ops:
                for info in op.reads:
                    if info in op.writes or info.order not in op.read_hash:
                        continue
                    if info.order not in current:
                        current[info.order] = digest(info.arr)
                    if current[info.order] == op.read_hash[info.order]:
                        continue
                    self.resolve_name(info, frame)
                    culprit = next(
                        (
                            later
                            for later in self.ops[op.index + 1 :]
                            if any(w is info or overlap(w.span, info.span) for w in later.writes)
                        ),
                        None,
                    )
                    fam = self.family_of(info)
                    if culprit is None:
                        msg = (
                            f"`{info.name}` was read by the {op.label} at {op.path}:{op.line} and changed on the host "
                            f"before the backward at {path}:{line}: the backward replays against the new contents"
                        )
                        self.add_finding("WF902", path, line, msg, ("WF902", path, line, fam), classified_as="WF303",
                                         array=info.name, family=fam)  # fmt: skip
                        continue
                    where = "later on the same tape" if culprit.tape is tape else "after it was recorded"
                    msg = (
                        f"the {culprit.label} overwrites `{info.name}` {where}, but the {op.label} at "
                        f"{op.path}:{op.line} read it and its adjoint runs at the backward at {path}:{line} "
                        "against the new contents"
                    )
                    self.add_finding(
                        "WF902", culprit.path, culprit.line, msg,
                        ("WF902", culprit.path, culprit.line, culprit.label, fam),
                        classified_as=self.overwrite_shape(culprit, info, tape), library=culprit.library,
                        array=info.name, family=fam, reader=f"{op.path}:{op.line}", backward=f"{path}:{line}",
                    )  # fmt: skip

    def family_of(self, info: ArrayInfo) -> str:
        """What groups findings about one array: its name without list indices, else its argument label."""
        if info.name.startswith("array#"):
            return info.label or "array"
        return family(info.name)

    @staticmethod
    def overwrite_shape(culprit: Op, info: ArrayInfo, tape: Any) -> str:
        """The static rule that names the shape of an overwrite the probe saw at runtime."""
        if culprit.tape is not tape and culprit.recording is not tape:
            return "WF303"  # written between the end of recording and the backward
        if culprit.kind in ("copy", "assign"):
            return "WF101"
        if culprit.kind in ("zero", "fill"):
            return "WF105"  # zeroed or filled while the tape recorded, after a recorded launch read it
        uses = culprit.positions.get(info.order, [])
        if not uses:
            return "WF108"  # written through another array over the same memory
        if any(pos is None for pos, _, _ in uses):
            return "WF107"
        write_pos = {pos for pos, _, w in uses if w}
        if write_pos and any(r and pos not in write_pos for pos, r, _ in uses):
            return "WF103"  # one object passed as input and as output
        if any(r and w for _, r, w in uses):
            return "WF106"
        return "WF104"

    def tape_arrays(self, tape: Any) -> set[int]:
        """Ids of the arrays Warp's own record of ``tape`` passes to its launches."""
        out: set[int] = set()
        for launch in tape.launches:
            if isinstance(launch, list):
                for arr, _, _ in self.array_args(list(launch[3]) + list(launch[4])):
                    out.add(id(arr))
        return out

    def check_accumulated(self, params: list[ArrayInfo], path: str, line: int, used: set[int]) -> None:
        """WF903: the next iteration's backward must start from zero gradients (of the parameters it uses).
        One finding per backward: one missing ``tape.zero()`` leaves every gradient of the tape summed."""
        stale: list[tuple[ArrayInfo, float]] = []
        with self.paused():
            for info in params:
                g = info.arr.grad
                if id(info.arr) not in used or g is None:
                    continue
                vals = flat(g.numpy())
                if np.any(vals != 0.0):
                    stale.append((info, float(np.max(np.abs(vals)))))
        if not stale:
            return
        # name the array the program trains (or at least names) first
        stale.sort(key=lambda item: (not item[0].trained, item[0].name.startswith("array#"), -item[1]))
        info, worst = stale[0]
        others = f" (and {len(stale) - 1} other gradient(s) of this tape)" if len(stale) > 1 else ""
        msg = (
            f"`{info.name}.grad`{others} is already non-zero (max |g| = {worst:.4g}) when the next iteration's "
            "backward starts: gradients from the previous iteration are summed in (missing tape.zero())"
        )
        self.add_finding("WF903", path, line, msg, ("WF903", path, line), classified_as="WF301",
                         array=info.name, arrays=[i.name for i, _ in stale])  # fmt: skip

    # ----------------------------------------------------------------- window end and output
    def end_window(self) -> None:
        """A parameter was updated from gradients. After window 0, trace the next iteration as window 1
        (its first backward also checks WF903); after window 1 only wait for that check."""
        self.stopped = "window-end"
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
            "seconds": self.seconds,
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
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb) if f.filename.startswith(_SKIP_DIRS[1])),
                     "")  # fmt: skip
        self.error = f"internal error in the probe: {type(exc).__name__}: {exc}" + (f" ({where})" if where else "")
        self.finish("internal-error")


class _ProgramError(Exception):
    """An exception raised by the program's own call into Warp, carried through the probe's hooks."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _pointer(arg: Any) -> int | None:
    """The address a native routine's argument passes, if it is one (an int or a ctypes pointer)."""
    import ctypes  # noqa: PLC0415

    if isinstance(arg, int) and not isinstance(arg, bool):
        return arg
    if isinstance(arg, ctypes._Pointer | ctypes.c_void_p):
        return ctypes.cast(arg, ctypes.c_void_p).value
    if isinstance(arg, ctypes.c_uint64 | ctypes.c_int64 | ctypes.c_size_t):
        return arg.value
    return None


def _as_program(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its exceptions wrapped as the program's (see :meth:`Tracer.shield`)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _ProgramError:
            raise
        except Exception as exc:
            raise _ProgramError(exc) from exc

    return call


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
    global _SKIP_DIRS, _LIBRARY_DIRS
    out_path = os.environ.pop(ENV_OUT, None)
    device = os.environ.pop(ENV_DEVICE, None)
    probe_dir = os.environ.pop(ENV_PATH, None)
    if probe_dir:
        parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != probe_dir]
        if parts:
            os.environ["PYTHONPATH"] = os.pathsep.join(parts)
        else:
            os.environ.pop("PYTHONPATH", None)
    if not out_path:
        return
    try:
        import warp as wp  # noqa: PLC0415
    except Exception as exc:  # noqa: BLE001 - reported as one line
        _write_error(out_path, f"the program's interpreter {sys.executable} cannot load the probe: "
                               f"{type(exc).__name__}: {exc}")  # fmt: skip
        os._exit(0)
    _SKIP_DIRS = _skip_dirs()
    _LIBRARY_DIRS = _library_dirs()
    tracer = Tracer(out_path, os.getcwd())
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
    previous_hook = sys.excepthook

    def excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if tracer.mode != "done" and tracer.error is None:
            text = "".join(traceback.format_exception(kind, exc, tb)[-6:])
            tracer.error = f"the program crashed: {kind.__name__}: {exc}\n{text}"
        previous_hook(kind, exc, tb)

    sys.excepthook = excepthook
    atexit.register(tracer.at_exit)
