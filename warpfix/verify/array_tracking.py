"""Part of the verify probe: the arrays the window touches (names, snapshots, frees, frozen arguments)
and the kernels' write flags (Warp's tracker)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .records import ArrayInfo, digest
from .spans import SpanIndex, mem_range


class ArrayTracking:
    """Tracer's bookkeeping of the window's arrays."""

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
