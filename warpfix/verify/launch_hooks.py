"""Part of the verify probe: the hooks on Warp's launches, copies, fills, graph captures and numpy reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .records import ProbeGraph
from .slab_reads import kernel_slabs, slab_of


class LaunchHooks:
    """Tracer's hooks on the calls that read and write arrays."""

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
        self.next_slabs = self.launch_slabs(kernel, all_args, labels)  # for traced_op, and the tracker mirror
        if taped and flags:
            self.mirror_tracker(kernel, all_args, flags, self.next_slabs)
        unflagged = frozenset(unwritten - written_ids)
        known = len(self.ops)
        result = self.traced_op("launch", f"launch of kernel {kernel.key}", tape, arrays, lambda: orig(*args, **kwargs),
                                replay, self.flag_trust.read_only(kernel, unflagged))  # fmt: skip
        if len(self.ops) > known:
            self.flag_trust.learn(kernel, unflagged, self.ops[known].writes)
        return result

    def launch_slabs(self, kernel: Any, args: list[Any], labels: list[str]) -> dict[int, int]:
        """Argument position -> the slab of that array argument the launch touches, where known (slab_reads.py)."""
        slabs = self.slab_args.get(id(kernel))
        if slabs is None:
            slabs = self.slab_args[id(kernel)] = (kernel, kernel_slabs(kernel))
        if not slabs[1]:
            return {}  # most kernels: no argument reached by slab
        values = dict(zip(labels, args, strict=False))
        found = {i: slab_of(slabs[1], values, label) for i, label in enumerate(labels[: len(args)])}
        return {i: s for i, s in found.items() if s is not None}

    def mirror_tracker(self, kernel: Any, args: list[Any], flags: list[tuple[str, bool, bool]],
                       slabs: dict[int, int]) -> None:
        """Warp's `verify_autograd_array_access` check, on the recorded launch, attributed to its call site
        (``slabs``: the slab the launch touches at each argument position, where known)."""
        path, line = self.site()
        library = self.library_site()
        name = kernel.adj.fun_name
        for msg in self.codegen_warnings.pop(name, []):
            self.add_finding("WF905", path, line, f"Warp overwrite tracker: {msg}", ("WF905", path, line, name, msg),
                             classified_as="WF106", library=library, kernel=name)  # fmt: skip
        slab = [slabs.get(i) for i in range(len(args))]
        for i, v in enumerate(args):
            if not self.is_array(v) or i >= len(flags):
                continue
            label, is_read, is_write = flags[i]
            if is_write and self.tracker_overlaps(id(v), slab[i]):
                # the same array read through another argument of this launch, at a slab this one may write
                aliased = any(v is w and j != i and j < len(flags) and flags[j][1]
                              and (slab[j] is None or slab[i] is None or slab[j] == slab[i])
                              for j, w in enumerate(args))
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
                self.tracker_add(id(v), slab[i])

    def tracker_overlaps(self, key: int, slab: int | None) -> bool:
        """Whether a write of ``slab`` (None: all of it) of array ``key`` meets a read the tracker remembers."""
        if key not in self.tracker_read:
            return False
        read = self.tracker_slabs.get(key)
        return read is None or slab is None or slab in read

    def tracker_add(self, key: int, slab: int | None) -> None:
        """Remember a read of ``slab`` (None: all) of array ``key``: only slabs while every read named one."""
        if slab is None:
            self.tracker_slabs.pop(key, None)
        elif key not in self.tracker_read:
            self.tracker_slabs[key] = {slab}
        elif key in self.tracker_slabs:
            self.tracker_slabs[key].add(slab)
        self.tracker_read.add(key)

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
            self.tracker_add(id(src), None)
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
                self.grad_reads.add(id(arr))
                self.early_grad.on_host_read(arr)
            elif arr.requires_grad and id(arr) not in self.host_reads:
                path, line = self.site()
                self.host_reads[id(arr)] = (arr, f"{path}:{line}", len(self.ops))
                if arr.grad is not None and id(arr.grad) not in self.grads:
                    # an array the tape reaches only through host code (``tape.record_func``): reading its
                    # gradient is a gradient read too (a host update ``x.assign(x.numpy() - lr * g)`` follows)
                    self.grads[id(arr.grad)] = arr.grad
        return orig(arr, *args, **kwargs)
