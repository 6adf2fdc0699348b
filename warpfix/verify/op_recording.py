"""Part of the verify probe: recording the window's operations (launches, native routines) with
their frozen arguments."""

from __future__ import annotations

import inspect
import sys
import time
from collections.abc import Callable
from typing import Any

from . import program_sites
from .program_sites import _as_program, _real
from .records import (
    ArrayInfo,
    Op,
    digest,
)
from .spans import overlap

#: The window is cut after this many operations.
OP_CAP = 20000

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


class OpRecording:
    """Tracer's recording of operations into the window."""

    # ----------------------------------------------------------------- recording
    def record(self, op: Op) -> None:
        idx = op.index
        for info in op.reads:
            if info.first_read is None:
                info.first_read = idx
            if info.is_grad:
                self.grad_reads.add(id(info.arr))
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
            if op.kind == "assign" and self.verified and self.updated_on_host(info):
                end_window = True  # ``x.assign(x.numpy() - lr * x.grad.numpy())``: the program's update
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

    def updated_on_host(self, info: ArrayInfo) -> bool:
        """Whether the host read the array and its gradient before this write: a parameter the program steps
        with numpy (one that reaches the tape only through host code, ``tape.record_func``, is no leaf FD sees,
        but its update still ends the iteration)."""
        arr = info.arr
        return arr.grad is not None and id(arr.grad) in self.grad_reads and id(arr) in self.host_reads

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
        if tape is None and not any(self.tracked(a) or (r and a.requires_grad) for a, r, *_ in arrays) and not (
                kind == "assign" and self.host_grad_read and any(id(a) in self.host_reads for a, *_ in arrays)):
            # initialises fresh arrays from untraced data (allocation internals, constant setup): the
            # result is a constant of the window, captured by the snapshot at the next touch -- but a host
            # update of an array the host read with its gradient (``x.assign(x.numpy() - lr * g)``) is traced
            return run()
        started = time.perf_counter()
        if tape is not None and self.tape_start is None and self.window == 0:
            self.checkpoint()
        frame = self.user_frame()
        path, line = self.site()
        infos = [(self.touch(a, frame, lab), r, w, lab, pos) for a, r, w, lab, pos in arrays]
        pre: dict[int, int] = {}
        slabs, self.next_slabs = self.next_slabs, {}  # the launch's (launch_hooks.launch_slabs)
        slab_read = _slab_reads(infos, slabs)
        slab_hash: dict[int, tuple[int, int]] = {}
        with self.paused():
            for info, may_read, known_write, *_ in infos:
                if id(info) not in pre and (may_read or not known_write):
                    pre[id(info)] = digest(info.arr)
                if info.order in slab_read and info.order not in slab_hash:
                    slab_hash[info.order] = (slab_read[info.order], digest(info.arr[slab_read[info.order]]))
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
                recording=self.wp._src.context.runtime.tape, slabs=slabs, slab_hash=slab_hash)  # fmt: skip
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
            if not _real(frame.f_code.co_filename).startswith(program_sites.SKIP_DIRS[1:2]):  # not the probe's own frames
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


def _slab_reads(infos: list[tuple[Any, bool, bool, str, int | None]], slabs: dict[int, int]) -> dict[int, int]:
    """info.order -> the one slab a launch reads of it, where every position it is read through names the same
    known slab (``u[s, i, j]``: what the read's adjoint needs is that slab, not the whole array)."""
    read: dict[int, set[int | None]] = {}
    for info, may_read, _, _, pos in infos:
        if may_read:
            read.setdefault(info.order, set()).add(slabs.get(pos) if pos is not None else None)
    return {order: next(iter(s)) for order, s in read.items() if len(s) == 1 and None not in s}
