"""Child side of `warpfix verify`: run the user's program under hooks and verify its first iterations.

Run as ``python -m warpfix.verify.probe (--script FILE | --module NAME) -- ARGS...`` with
``WARPFIX_VERIFY_OUT`` naming the JSON result file (see :mod:`warpfix.verify.runner`).

What it does (DESIGN.md, "FD verification without a user harness"):

* hooks ``wp.launch``, ``wp.copy``, ``array.zero_/fill_/assign`` and ``Tape.backward/reset``,
  records every operation of the first training iteration (the *window*), taped or not,
  with frozen arguments, and snapshots every array the first time an operation touches it;
  then does the same for the next iteration (window 1), where bugs dormant at iteration 0 show;
* at each ``tape.backward(loss)`` compares the gradient that backward adds to every leaf
  parameter with central FD of that loss, replaying the whole window from the snapshots;
* checks that arrays a taped launch read are unchanged when its backward starts (WF902),
  that ``.grad`` is zero when the next iteration's backward starts (WF903), and mirrors
  Warp's overwrite tracker on the recorded launches (WF905);
* stops the program when window 1 ends (a parameter is written from gradient data, a backward
  reads none of the window's parameters), or at a cap: verify never runs a whole training.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import runpy
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from warpfix.verify import judge
from warpfix.verify.adjoint import check_custom_adjoints
from warpfix.verify.adjoint import install_hook as install_adjoint_hook
from warpfix.verify.runner import ENV_DEVICE, ENV_OUT

#: Step-size ladder (dimensionless, times the per-element scale of the parameter).
STEP_LADDER = (1e-1, 1e-2, 1e-3, 1e-4)
#: A step is at least this many ulp of the perturbed value.
MIN_STEP_ULPS = 32.0
#: Element samples per parameter (both ends plus random ones) and random +-1 directions.
ELEMENT_SAMPLES = 4
DIRECTION_SAMPLES = 2
#: The window is cut after this many operations.
OP_CAP = 20000
#: ... or this many backward calls.
BACKWARD_CAP = 32
#: No new backward is compared once FD has taken this many seconds.
FD_BUDGET_S = 60.0
#: Replays that do not reproduce the loss to this relative tolerance make FD unreliable.
REPLAY_RTOL = 1e-4

_SKIP_DIRS: tuple[str, ...] = ()


def _skip_dirs() -> tuple[str, ...]:
    import warp  # noqa: PLC0415

    here = Path(__file__).resolve().parents[1]
    return (str(Path(warp.__file__).resolve().parent), str(here), os.path.dirname(runpy.__file__))


@dataclass(eq=False)
class ArrayInfo:
    """What the probe knows about one array touched in the window."""

    arr: Any
    order: int
    snap: Any
    name: str
    hash: int
    first_read: int | None = None
    taped_write: bool = False
    written_after_read: bool = False
    tainted: bool = False
    is_grad: bool = False
    span: tuple[Any, int, int] | None = None  # memory range, to find writes through aliases


@dataclass(eq=False)
class Op:
    """One recorded operation of the window."""

    index: int
    kind: str  # "launch", "copy", "assign", "fill", "zero"
    label: str  # e.g. "launch of kernel integrate"
    path: str
    line: int
    tape: Any
    replay: Callable[[], None]
    reads: list[ArrayInfo]
    writes: list[ArrayInfo]
    read_hash: dict[int, int] = field(default_factory=dict)  # info.order -> content hash when read


@dataclass
class ReplayPlan:
    """What every FD replay of one backward does: the operations, what to restore, where leaves are read."""

    n_ops: int
    restore: list[ArrayInfo]
    leaves_at: dict[int, list[ArrayInfo]]  # op index -> leaves first read there


@dataclass
class BackwardRecord:
    """The verdicts of a compared backward, kept to recognise cross-window mismatches."""

    params: dict[int, str]  # info.order -> verdict


def _digest(arr: Any) -> int:
    data = np.ascontiguousarray(arr.numpy())
    return zlib.crc32(data.view(np.uint8).reshape(-1))


def _flat(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1)


def _mem_range(arr: Any) -> tuple[Any, int, int] | None:
    """(device, first byte, end byte) of the memory an array view spans; None without memory."""
    if arr.ptr is None:
        return None
    from warp._src.types import type_size_in_bytes  # noqa: PLC0415

    last = sum((s - 1) * abs(st) for s, st in zip(arr.shape, arr.strides, strict=True))
    return arr.device, arr.ptr, arr.ptr + last + type_size_in_bytes(arr.dtype)


def _overlap(a: tuple[Any, int, int] | None, b: tuple[Any, int, int] | None) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return False
    return a[1] < b[2] and b[1] < a[2]


class Tracer:
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
        self.grads: dict[int, Any] = {}  # id(grad array) -> grad array (kept alive)
        self.tape_since: dict[int, int] = {}  # id(tape) -> op index of its last reset
        self.backwards: list[dict[str, Any]] = []
        self.verified: list[BackwardRecord] = []
        self.window_params: list[ArrayInfo] = []
        self.findings: list[dict[str, Any]] = []
        self._finding_keys: set[tuple] = set()
        self.flags: dict[int, list[tuple[str, bool, bool]] | None] = {}
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
        return self.enabled and self.mode == "window" and self.depth == 0

    def site(self) -> tuple[str, int]:
        """(path relative to cwd, line) of the innermost user frame: where the program called Warp."""
        frame = self.user_frame()
        if frame is None:
            return "<unknown>", 0
        return self.relpath(frame.f_code.co_filename), frame.f_lineno

    def user_frame(self) -> Any:
        frame = sys._getframe(1)
        while frame is not None:
            fn = frame.f_code.co_filename
            if not fn.startswith(_SKIP_DIRS) and not fn.startswith("<"):
                return frame
            frame = frame.f_back
        return None

    def relpath(self, path: str) -> str:
        ap = os.path.abspath(path)
        try:
            rel = os.path.relpath(ap, self.cwd)
        except ValueError:
            return ap
        return ap if rel.startswith("..") else rel

    def add_finding(self, rule: str, path: str, line: int, message: str, key: tuple, **data: Any) -> None:
        if key in self._finding_keys:
            return
        self._finding_keys.add(key)
        self.findings.append({"rule": rule, "path": path, "line": line, "message": message, "data": data})

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
        return None

    def touch(self, arr: Any, frame: Any) -> ArrayInfo:
        info = self.arrays.get(id(arr))
        if info is not None and info.arr is arr:
            return info
        with self.paused():
            snap = self.wp.clone(arr, requires_grad=False)
            h = _digest(arr)
        order = len(self.arrays)
        name = (self.name_of(arr, frame) if arr.requires_grad else None) or f"array#{order}{list(arr.shape)}"
        info = ArrayInfo(arr=arr, order=order, snap=snap, name=name, hash=h, span=_mem_range(arr))
        info.is_grad = id(arr) in self.grads and self.grads[id(arr)] is arr
        info.tainted = info.is_grad
        self.arrays[id(arr)] = info
        if arr.requires_grad and arr.grad is not None:
            self.grads[id(arr.grad)] = arr.grad
        return info

    def tracked(self, arr: Any) -> bool:
        """True for arrays of the window: touched before, a traced gradient, or a view/alias of one."""
        info = self.arrays.get(id(arr))
        if (info is not None and info.arr is arr) or self.grads.get(id(arr)) is arr:
            return True
        # memory that arr does not own (a view, a `ptr=` alias) may belong to a traced array
        if arr.deleter is not None:
            return False
        span = _mem_range(arr)
        return any(_overlap(span, i.span) for i in self.arrays.values())

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

    def struct_arrays(self, v: Any) -> Iterator[Any]:
        for name in v._cls.vars:
            f = getattr(v, name)
            if self.is_array(f):
                yield f
            elif isinstance(f, self.wp._src.codegen.StructInstance):
                yield from self.struct_arrays(f)

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
        tainted_in = any(i.tainted or i.is_grad for i in op.reads) or (op.kind == "assign" and self.host_grad_read)
        end_window = False
        for info in op.writes:
            if op.tape is not None:
                info.taped_write = True
            if info.first_read is not None and info.first_read < idx:
                if self.is_param_candidate(info) and tainted_in and self.verified:
                    end_window = True
                info.written_after_read = True
            if tainted_in:
                info.tainted = True
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
            and not info.written_after_read
            and info.first_read is not None
            and self.wp._src.types.type_scalar_type(arr.dtype) in (self.wp.float32, self.wp.float64)
        )

    def array_args(self, values: list[Any]) -> list[tuple[Any, int | None]]:
        out: list[tuple[Any, int | None]] = []
        for i, v in enumerate(values):
            if self.is_array(v):
                out.append((v, i))
            elif isinstance(v, self.wp._src.codegen.StructInstance):
                out.extend((a, None) for a in self.struct_arrays(v))
        return out

    def traced_op(
        self,
        kind: str,
        label: str,
        tape: Any,
        arrays: list[tuple[Any, bool, bool]],
        run: Callable[[], Any],
        replay: Callable[[], None],
    ) -> Any:
        """Run one operation and record it. ``arrays``: (array, may_read, known_write) triples; a write
        the caller does not know of is found by a change of the array's contents."""
        if tape is None and not any(self.tracked(a) or (r and a.requires_grad) for a, r, _ in arrays):
            # initialises fresh arrays from untraced data (allocation internals, constant setup): the
            # result is a constant of the window, captured by the snapshot at the next touch
            return run()
        frame = self.user_frame()
        path, line = self.site()
        infos = [(self.touch(a, frame), r, w) for a, r, w in arrays]
        pre = {}
        with self.paused():
            for info, _, _ in infos:
                pre[id(info)] = _digest(info.arr)
        self.depth += 1
        try:
            result = run()
        finally:
            self.depth -= 1
        reads: list[ArrayInfo] = []
        writes: list[ArrayInfo] = []
        read_hash: dict[int, int] = {}
        with self.paused():
            for info, may_read, known_write in infos:
                post = _digest(info.arr)
                written = known_write or post != pre[id(info)]
                if written and info not in writes:
                    writes.append(info)
                if may_read and info not in reads:
                    reads.append(info)
                    read_hash[info.order] = pre[id(info)]
                info.hash = post
        op = Op(len(self.ops), kind, label, path, line, tape, replay, reads, writes, read_hash)
        self.record(op)
        return result

    # ----------------------------------------------------------------- hooks
    def on_launch(self, orig: Callable, args: tuple, kwargs: dict) -> Any:
        if not self.tracing():
            return orig(*args, **kwargs)
        a = self.signatures["launch"].bind(*args, **kwargs).arguments
        if a.get("adjoint") or a.get("record_cmd"):
            return orig(*args, **kwargs)
        kernel = a["kernel"]
        inputs = list(a.get("inputs", []) or [])
        outputs = list(a.get("outputs", []) or [])
        runtime = self.wp._src.context.runtime
        taped = runtime.tape is not None and a.get("record_tape", True)
        tape = runtime.tape if taped else None
        flags = self.kernel_flags(kernel)
        if taped:
            self.taped_kernels[id(kernel)] = kernel
        fi = [self.freeze(v) for v in inputs]
        fo = [self.freeze(v) for v in outputs]
        dim, device = a["dim"], a.get("device")
        max_blocks, block_dim = a.get("max_blocks", 0), a.get("block_dim")

        cmd: list[Any] = []

        def replay() -> None:
            # a prepared launch (arguments packed once) keeps replays cheap
            if not cmd:
                cmd.append(orig(kernel, dim, inputs=fi, outputs=fo, device=device, record_tape=False,
                                max_blocks=max_blocks, block_dim=block_dim, record_cmd=True))  # fmt: skip
            if cmd[0] is not None:
                cmd[0].launch()

        arrays: list[tuple[Any, bool, bool]] = []
        all_args = inputs + outputs
        for arr, pos in self.array_args(all_args):
            if pos is None:
                arrays.append((arr, True, False))
                continue
            is_read, is_write = (flags[pos][1], flags[pos][2]) if flags and pos < len(flags) else (True, False)
            known_write = is_write or pos >= len(inputs)
            # Warp's read flag misses `a[i] * b` reads: only "written and not flagged read" means write-only
            arrays.append((arr, not (is_write and not is_read), known_write))
        if taped and flags:
            self.mirror_tracker(kernel, all_args, flags)
        return self.traced_op("launch", f"launch of kernel {kernel.key}", tape, arrays,
                              lambda: orig(*args, **kwargs), replay)  # fmt: skip

    def mirror_tracker(self, kernel: Any, args: list[Any], flags: list[tuple[str, bool, bool]]) -> None:
        """Warp's `verify_autograd_array_access` check, on the recorded launch, attributed to its call site."""
        path, line = self.site()
        name = kernel.adj.fun_name
        for msg in self.codegen_warnings.pop(name, []):
            self.add_finding("WF905", path, line, f"Warp overwrite tracker: {msg}", ("WF905", path, line, msg),
                             kernel=name)  # fmt: skip
        for i, v in enumerate(args):
            if not self.is_array(v) or i >= len(flags):
                continue
            label, is_read, is_write = flags[i]
            if is_write and id(v) in self.tracker_read:
                msg = (
                    f"argument `{label}` of kernel `{name}` is written here but the array was already read "
                    "by an earlier launch on the tape; the earlier launch's adjoint will see the new values"
                )
                self.add_finding("WF905", path, line, f"Warp overwrite tracker: {msg}", ("WF905", path, line, label),
                                 kernel=name, argument=label)  # fmt: skip
            if is_read:
                self.tracker_read.add(id(v))

    def on_copy(self, orig: Callable, args: tuple, kwargs: dict) -> Any:
        if not self.tracing():
            return orig(*args, **kwargs)
        a = self.signatures["copy"].bind(*args, **kwargs).arguments
        dest, src = a["dest"], a["src"]
        if not (self.is_array(dest) and self.is_array(src)):
            return orig(*args, **kwargs)
        dest_offset, src_offset, count = a.get("dest_offset", 0), a.get("src_offset", 0), a.get("count", 0)
        runtime = self.wp._src.context.runtime
        taped = runtime.tape is not None and src.grad is not None and dest.grad is not None
        tape = runtime.tape if taped else None
        d_alias, s_alias = self.nograd(dest), self.nograd(src)

        def replay() -> None:
            orig(d_alias, s_alias, dest_offset=dest_offset, src_offset=src_offset, count=count)

        if taped:
            path, line = self.site()
            if id(dest) in self.tracker_read:
                msg = "an array copy writes an array already read by an earlier launch on the tape"
                self.add_finding("WF905", path, line, f"Warp overwrite tracker: {msg}", ("WF905", path, line, "copy"))
            self.tracker_read.add(id(src))
        arrays = [(src, True, False), (dest, False, True)]
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
        if not self.tracing():
            return orig(arr, src)
        if self.is_array(src):
            # array.assign(array) is a wp.copy (recorded and differentiable): trace it as one
            return self.wp.copy(arr, src)
        frozen = self.wp.array(np.array(src, copy=True), dtype=arr.dtype, device="cpu")
        alias = self.nograd(arr)

        def replay() -> None:
            self.orig["copy"](alias, frozen)

        return self.traced_op("assign", "array.assign", None, [(arr, False, True)], lambda: orig(arr, src), replay)

    def on_fill(self, orig: Callable, kind: str, arr: Any, *value: Any) -> Any:
        if not self.tracing():
            return orig(arr, *value)
        frozen = tuple(self.freeze(v) for v in value)
        self.tracker_read.discard(id(arr))

        def replay() -> None:
            orig(arr, *frozen)

        return self.traced_op(kind, f"array.{kind}_", None, [(arr, False, True)], lambda: orig(arr, *value), replay)

    def on_numpy(self, orig: Callable, arr: Any, *args: Any, **kwargs: Any) -> Any:
        if self.tracing():
            if self.grads.get(id(arr)) is arr:
                self.host_grad_read = True
            elif arr.requires_grad and id(arr) not in self.host_reads:
                path, line = self.site()
                self.host_reads[id(arr)] = (arr, f"{path}:{line}", len(self.ops))
        return orig(arr, *args, **kwargs)

    def on_reset(self, orig: Callable, tape: Any) -> Any:
        self.tape_since[id(tape)] = len(self.ops)
        for launch in tape.launches:
            if isinstance(launch, list):
                self.tracker_read.difference_update(id(v) for v in list(launch[3]) + list(launch[4]))
        with self.paused():
            return orig(tape)

    def on_backward(self, orig: Callable, tape: Any, loss: Any = None, grads: Any = None) -> Any:
        if not self.enabled or self.depth > 0 or self.mode == "done":
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
        if loss is None:
            self.error = (
                f"tape.backward() at {site} was called without a loss array (grads=... seeds the backward by "
                "hand): there is no scalar objective to compare with finite differences"
            )
            self.finish("no-loss")
        taped_ops = [op for op in self.ops[self.tape_since.get(id(tape), 0):] if op.tape is tape]
        leaves: list[ArrayInfo] = []
        for op in taped_ops:
            for info in op.reads:
                if info not in leaves and self.is_param_candidate(info) and info.arr is not loss:
                    leaves.append(info)
        if self.verified:
            known = {id(i) for i in self.window_params}
            with self.paused():
                host_written = [i for i in leaves if id(i) in known and _digest(i.arr) != i.hash]
            if not any(id(i) in known for i in leaves) or host_written:
                # a new iteration: fresh parameters, or parameters updated on the host
                self.check_accumulated(self.window_params, path, line, {id(i.arr) for i in leaves})
                self.finish("window-end")
        frame = self.user_frame()
        for info in leaves:
            self.resolve_name(info, frame)
        self.check_integrity(tape, taped_ops, path, line, frame)
        if len(self.verified) >= BACKWARD_CAP or self.fd_seconds > FD_BUDGET_S:
            self.finish("cap")
        started = time.perf_counter()
        with self.paused():
            loss_value = float(np.asarray(loss.numpy(), dtype=np.float64).reshape(-1)[0])
            before = {id(i): _flat(i.arr.grad.numpy()).copy() for i in leaves}
            result = orig(tape, loss, grads)
            ad = {id(i): _flat(i.arr.grad.numpy()) - before[id(i)] for i in leaves}
            self.tracker_read.difference_update(id(a) for op in taped_ops for a in (x.arr for x in op.reads))
            entry: dict[str, Any] = {"site": site, "loss": loss_value, "window": self.window, "params": []}
            if not taped_ops:
                entry["note"] = "the tape recorded no operation before this backward"
            elif not leaves:
                entry["note"] = "no leaf parameter (a requires_grad array read on the tape and never written) reaches the loss"
            else:
                entry["params"] = self.compare(loss, loss_value, leaves, ad, path, line)
        for info in leaves:
            if info not in self.window_params:
                self.window_params.append(info)
        self.verified.append(BackwardRecord({i.order: p["verdict"] for i, p in zip(leaves, entry["params"], strict=False)}))
        self.backwards.append(entry)
        self.fd_seconds += time.perf_counter() - started
        self.flush()
        return result

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
                        current[info.order] = _digest(info.arr)
                    if current[info.order] == op.read_hash[info.order]:
                        continue
                    self.resolve_name(info, frame)
                    culprit = next(
                        (
                            later
                            for later in self.ops[op.index + 1 :]
                            if any(w is info or _overlap(w.span, info.span) for w in later.writes)
                        ),
                        None,
                    )
                    if culprit is None:
                        msg = (
                            f"`{info.name}` was read by the {op.label} at {op.path}:{op.line} and changed on the host "
                            f"before the backward at {path}:{line}: the backward replays against the new contents"
                        )
                        self.add_finding("WF902", path, line, msg, ("WF902", path, line, info.name), array=info.name)
                        continue
                    where = "later on the same tape" if culprit.tape is tape else "after it was recorded"
                    msg = (
                        f"the {culprit.label} overwrites `{info.name}` {where}, but the {op.label} at "
                        f"{op.path}:{op.line} read it and its adjoint runs at the backward at {path}:{line} "
                        "against the new contents"
                    )
                    self.add_finding(
                        "WF902", culprit.path, culprit.line, msg, ("WF902", culprit.path, culprit.line, info.name),
                        array=info.name, reader=f"{op.path}:{op.line}", backward=f"{path}:{line}",
                    )  # fmt: skip

    def tape_arrays(self, tape: Any) -> set[int]:
        """Ids of the arrays Warp's own record of ``tape`` passes to its launches."""
        out: set[int] = set()
        for launch in tape.launches:
            if isinstance(launch, list):
                for arr, _ in self.array_args(list(launch[3]) + list(launch[4])):
                    out.add(id(arr))
        return out

    def check_accumulated(self, params: list[ArrayInfo], path: str, line: int, used: set[int]) -> None:
        """WF903: the next iteration's backward must start from zero gradients (of the parameters it uses)."""
        with self.paused():
            for info in params:
                if id(info.arr) not in used:
                    continue
                g = info.arr.grad
                if g is None:
                    continue
                vals = _flat(g.numpy())
                if np.any(vals != 0.0):
                    msg = (
                        f"`{info.name}.grad` is already non-zero (max |g| = {np.max(np.abs(vals)):.4g}) when the "
                        "next iteration's backward starts: gradients from the previous iteration are summed in "
                        "(missing tape.zero())"
                    )
                    self.add_finding("WF903", path, line, msg, ("WF903", path, line, info.name), array=info.name)

    # ----------------------------------------------------------------- FD
    def restore(self, infos: list[ArrayInfo], source: dict[int, Any] | None = None) -> None:
        copy = self.orig["copy"]
        for info in reversed(infos):
            snap = info.snap if source is None else source[id(info)]
            copy(self.nograd(info.arr), snap)

    def replay(
        self,
        plan: ReplayPlan,
        loss: Any,
        perturb: dict[int, np.ndarray],
        capture: dict[int, np.ndarray] | None = None,
    ) -> float:
        """Restore the window's snapshots and replay its operations up to the backward; return the loss.

        ``perturb`` maps a leaf's order to a flat delta added right before its first read;
        ``capture`` receives each leaf's flat value at that point.
        """
        self.restore(plan.restore)
        for op in self.ops[: plan.n_ops]:
            for info in plan.leaves_at.get(op.index, ()):
                if capture is not None:
                    capture[info.order] = _flat(info.arr.numpy()).copy()
                if info.order in perturb:
                    cur = info.arr.numpy()
                    new = (_flat(cur) + perturb[info.order]).astype(cur.dtype).reshape(cur.shape)
                    src = self.wp.array(new, dtype=info.arr.dtype, device=info.arr.device)
                    self.orig["copy"](self.nograd(info.arr), src)
            op.replay()
        return float(np.asarray(loss.numpy(), dtype=np.float64).reshape(-1)[0])

    def compare(
        self, loss: Any, loss_value: float, leaves: list[ArrayInfo], ad: dict[int, np.ndarray], path: str, line: int
    ) -> list[dict[str, Any]]:
        wp = self.wp
        n_ops = len(self.ops)
        infos = sorted(self.arrays.values(), key=lambda i: i.order)
        checkpoint = {id(i): wp.clone(i.arr, requires_grad=False) for i in infos}
        # a replay restores what the window writes and every parameter (an earlier replay perturbed it)
        written = {id(w) for op in self.ops for w in op.writes}
        plan = ReplayPlan(n_ops, [i for i in infos if id(i) in written or self.is_param_candidate(i)], {})
        for info in leaves:
            plan.leaves_at.setdefault(info.first_read, []).append(info)
        loss_dtype = np.float64 if loss.dtype == wp.float64 else np.float32
        loss_ulp = float(np.spacing(np.abs(loss_dtype(loss_value)))) if math.isfinite(loss_value) else 0.0
        try:
            values: dict[int, np.ndarray] = {}
            replays = (self.replay(plan, loss, {}, capture=values), self.replay(plan, loss, {}))
            worst = max(replays, key=lambda v: abs(v - loss_value) if math.isfinite(v) else math.inf)
            noise = abs(worst - loss_value) if math.isfinite(worst) else math.inf
            replay_ok = noise <= REPLAY_RTOL * abs(loss_value) + loss_ulp
            out = []
            for info in leaves:
                out.append(
                    self.compare_param(info, loss, loss_value, loss_ulp, noise, worst, replay_ok, values,
                                       ad[id(info)], plan)
                )  # fmt: skip
        finally:
            self.restore(infos, checkpoint)
        first_record = self.verified[0] if self.verified else None
        for info, res in zip(leaves, out, strict=True):
            host = self.host_reads.get(id(info.arr))
            if host is not None and host[0] is info.arr and host[2] <= n_ops:
                note = (
                    f"the program reads `{info.name}` on the host at {host[1]}: values it computes from it there "
                    "are constants to both autodiff and this FD"
                )
                res["reason"] = f"{res['reason']}; {note}" if res["reason"] else note
            earlier = first_record.params.get(info.order) if first_record else None
            if res["verdict"] == judge.FAIL and earlier == judge.PASS and res["signature"] != "NaN/inf":
                res["reason"] = (
                    f"{res['signature']} mismatch at a later backward of this iteration while the first agrees: "
                    "each tape differentiates its own window only"
                )
                res["signature"] = "cross-window"
            self.emit_param_findings(info, res, path, line)
        return out

    def compare_param(
        self,
        info: ArrayInfo,
        loss: Any,
        loss_value: float,
        loss_ulp: float,
        noise: float,
        replayed: float,
        replay_ok: bool,
        values: dict[int, np.ndarray],
        grad: np.ndarray,
        plan: ReplayPlan,
    ) -> dict[str, Any]:
        base = {"name": info.name, "max_rel_err": None, "ad_fd_ratio": None, "signature": ""}
        if not replay_ok:
            reason = (
                f"{judge.NOISE}: replaying the iteration gives loss {replayed:.7g} instead of "
                f"{loss_value:.7g} (nondeterministic forward or state the probe cannot restore)"
            )
            return {**base, "verdict": judge.UNRELIABLE, "reason": reason}
        x = values[info.order]  # the parameter as its first reader sees it
        dtype = np.float64 if self.wp._src.types.type_scalar_type(info.arr.dtype) == self.wp.float64 else np.float32
        xs = x.astype(dtype)
        ulp = np.spacing(np.abs(xs)).astype(np.float64)
        rms = float(np.sqrt(np.mean(x * x))) if x.size else 0.0
        scale = np.minimum(1.0, np.maximum(np.abs(x), rms))
        scale[scale == 0.0] = 1.0
        n = x.size
        picks = [0, n - 1] + [int(i) for i in self.rng.choice(n, size=min(n, ELEMENT_SAMPLES), replace=False)]
        elements = list(dict.fromkeys(picks))[:ELEMENT_SAMPLES]
        vectors: list[tuple[str, int | None, np.ndarray]] = []
        for i in elements:
            v = np.zeros(n)
            v[i] = scale[i]
            vectors.append(("element", i, v))
        if n > 1:
            for _ in range(DIRECTION_SAMPLES):
                vectors.append(("direction", None, self.rng.choice([-1.0, 1.0], size=n) * scale))
        ladders: list[tuple[str, int | None, float, list[judge.StepResult]]] = []
        for kind, idx, v in vectors:
            ad_v = float(np.dot(grad, v))
            nz = v != 0.0
            t_min = float(np.max(MIN_STEP_ULPS * ulp[nz] / np.abs(v[nz]))) if np.any(nz) else 0.0
            steps: list[judge.StepResult] = []
            for c in STEP_LADDER:
                # the whole ladder moves up when its smallest rung would be under MIN_STEP_ULPS
                t = max(c, t_min * c / STEP_LADDER[-1])
                plus = (xs + (t * v).astype(dtype)).astype(np.float64) - x
                minus = (xs - (t * v).astype(dtype)).astype(np.float64) - x
                lp = self.replay(plan, loss, {info.order: plus})
                lm = self.replay(plan, loss, {info.order: minus})
                # the effective step after rounding the perturbed parameter to its dtype
                t_eff = float((plus[idx] - minus[idx]) / (2.0 * v[idx])) if idx is not None else t
                steps.append(judge.StepResult(t_eff, lp, lm))
                if len(steps) == 2 and judge.early_pass(ad_v, steps, loss_ulp, noise):
                    break
            ladders.append((kind, idx, ad_v, steps))
        fd_mid = [abs(s[1].fd) for _, _, _, s in ladders if len(s) > 1 and math.isfinite(s[1].fd)]
        floor = 1e-3 * float(np.median(fd_mid)) if fd_mid else 0.0
        samples = []
        for kind, idx, ad_v, steps in ladders:
            samples.append(judge.judge_sample(kind, ad_v, steps, loss_ulp, noise=noise, fd_floor=floor, index=idx))
        chaos = any(abs(s.ad) > 1e4 * (abs(loss_value) + 1.0) for s in samples if math.isfinite(s.ad))
        verdict = judge.classify(samples, chaos_hint=chaos)
        return {
            **base,
            "verdict": verdict.verdict,
            "signature": verdict.signature,
            "max_rel_err": verdict.max_rel_err,
            "ad_fd_ratio": verdict.ad_fd_ratio,
            "reason": verdict.reason,
        }

    def emit_param_findings(self, info: ArrayInfo, res: dict[str, Any], path: str, line: int) -> None:
        if res["verdict"] == judge.FAIL:
            ratio = res.get("ad_fd_ratio")
            err = res.get("max_rel_err")
            parts = [f"autodiff gradient of `{info.name}` disagrees with finite differences ({res['signature']})"]
            if ratio is not None:
                parts.append(f"AD/FD ratio {ratio:.4g}")
            if err is not None:
                parts.append(f"max relative error {err:.3g}")
            if res.get("reason"):
                parts.append(res["reason"])
            self.add_finding("WF901", path, line, "; ".join(parts), ("WF901", path, line, info.name),
                             param=info.name, signature=res["signature"], ad_fd_ratio=ratio, max_rel_err=err)  # fmt: skip
        elif res["verdict"] == judge.UNRELIABLE:
            msg = f"finite differences cannot judge the gradient of `{info.name}`: {res.get('reason', '')}"
            self.add_finding("WF904", path, line, msg, ("WF904", path, line, info.name), param=info.name)

    # ----------------------------------------------------------------- window end and output
    def end_window(self) -> None:
        """A parameter was updated from gradients. After window 0, trace the next iteration as window 1
        (its first backward also checks WF903); after window 1 only wait for that check."""
        self.stopped = "window-end"
        if self.window == 0 and self.fd_seconds < FD_BUDGET_S / 2:
            self.window = 1
            self.previous_params = self.window_params
            self.window_params = []
            self.ops = []
            self.arrays = {}
            self.grads = {}
            self.tape_since = {}
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
        }

    def flush(self) -> None:
        tmp = self.out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.payload(), f, default=float)
        os.replace(tmp, self.out_path)

    def finish(self, why: str) -> None:
        """Write the result and end the process: verify never runs a whole training."""
        self.stopped = why
        if self.error is None and not self.backwards:
            self.error = {
                "program-exit": "the program finished without calling tape.backward(loss)",
                "cap": f"no tape.backward(loss) within the first {len(self.ops)} operations",
            }.get(why)
        if self.error is None and self.backwards and not any(b["params"] for b in self.backwards):
            self.error = "no backward had a leaf parameter to compare: " + "; ".join(
                f"{b['site']}: {b.get('note', '')}" for b in self.backwards
            )
        if self.backwards:
            with self.paused():
                for f in check_custom_adjoints(self.wp, self.relpath, list(self.taped_kernels.values())):
                    self.add_finding(f["rule"], f["path"], f["line"], f["message"], ("WF804", f["path"], f["line"]),
                                     **f.get("data", {}))  # fmt: skip
        self.mode = "done"
        self.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    # ----------------------------------------------------------------- installation
    def install(self) -> None:
        wp = self.wp
        ctx = wp._src.context
        types = wp._src.types
        tape_cls = wp._src.tape.Tape
        tracer = self

        orig_launch = ctx.launch
        orig_copy = ctx.copy
        self.orig["copy"] = orig_copy
        self.signatures = {"launch": inspect.signature(orig_launch), "copy": inspect.signature(orig_copy)}

        def launch(*args: Any, **kwargs: Any) -> Any:
            return tracer.on_launch(orig_launch, args, kwargs)

        def copy(*args: Any, **kwargs: Any) -> Any:
            return tracer.on_copy(orig_copy, args, kwargs)

        launch.__wrapped__ = orig_launch  # type: ignore[attr-defined]
        copy.__wrapped__ = orig_copy  # type: ignore[attr-defined]
        for mod in (wp, ctx):
            mod.launch = launch
            mod.copy = copy

        arr_cls = types.array
        orig_zero, orig_fill, orig_assign, orig_numpy = arr_cls.zero_, arr_cls.fill_, arr_cls.assign, arr_cls.numpy

        def zero_(self: Any) -> Any:
            return tracer.on_fill(orig_zero, "zero", self)

        def fill_(self: Any, value: Any) -> Any:
            return tracer.on_fill(orig_fill, "fill", self, value)

        def assign(self: Any, src: Any) -> Any:
            return tracer.on_assign(orig_assign, self, src)

        def numpy_(self: Any, *args: Any, **kwargs: Any) -> Any:
            return tracer.on_numpy(orig_numpy, self, *args, **kwargs)

        arr_cls.zero_, arr_cls.fill_, arr_cls.assign, arr_cls.numpy = zero_, fill_, assign, numpy_

        orig_backward, orig_reset = tape_cls.backward, tape_cls.reset

        def backward(self: Any, loss: Any = None, grads: Any = None) -> Any:
            return tracer.on_backward(orig_backward, self, loss, grads)

        def reset(self: Any) -> Any:
            return tracer.on_reset(orig_reset, self)

        tape_cls.backward, tape_cls.reset = backward, reset
        install_adjoint_hook(wp)


def main(argv: list[str] | None = None) -> int:
    global _SKIP_DIRS
    parser = argparse.ArgumentParser(prog="python -m warpfix.verify.probe")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--script")
    target.add_argument("--module")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    out_path = os.environ[ENV_OUT]
    cwd = os.getcwd()

    import warp as wp  # noqa: PLC0415

    _SKIP_DIRS = _skip_dirs()
    tracer = Tracer(out_path, cwd)
    device = os.environ.get(ENV_DEVICE)
    try:
        if device:
            wp.init()
            wp.set_device(device)
    except Exception as exc:  # noqa: BLE001 - reported as "could not run"
        tracer.error = f"cannot use device {device!r}: {exc}"
        tracer.finish("device")
    tracer.install()
    try:
        if ns.script:
            script = os.path.abspath(ns.script)
            sys.argv = [ns.script, *args]
            sys.path[0] = os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
        else:
            sys.argv = [ns.module, *args]
            sys.path[0] = cwd
            runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            tracer.error = f"the program exited with status {exc.code}"
    except BaseException as exc:  # noqa: BLE001 - any crash of the user's program is a verdict
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
        tracer.error = f"the program crashed: {type(exc).__name__}: {exc}\n{tb}"
    tracer.finish("crash" if tracer.error else "program-exit")
    return 0


if __name__ == "__main__":
    main()
