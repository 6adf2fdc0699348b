"""Part of the verify probe: the hooks on ``Tape.reset/backward`` and the checks run at each backward
(integrity of taped reads, accumulated gradients)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .records import ArrayInfo, BackwardRecord, Objective, Op, digest, family, flat
from .slab_reads import read_and_overwritten_apart
from .spans import overlap

#: ... or this many backward calls.
BACKWARD_CAP = 32
#: past the cap, the first iteration's later backwards run for their loss alone (no FD, no checks), up to this
#: many in all: ``apply --check`` judges a merge of backwards (WF601's hoist, one backward after the windows)
#: on the loss the iteration's last backward differentiated, which a capped run would not reach
LOSS_ONLY_CAP = 4096

class BackwardChecks:
    """Tracer's work at each backward."""

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
        first_of_next = bool(self.previous_params)
        if first_of_next:
            # the first backward of window 1: the previous iteration's gradients must be gone
            self.check_accumulated(self.previous_params, path, line, self.tape_arrays(tape))
            self.previous_params = []
        taped_ops = [op for op in self.ops[self.tape_since.get(id(tape), 0):] if op.tape is tape]
        if first_of_next and loss is not None and not grads:
            self.check_left_adjoints(taped_ops, [loss], path, line)
        # a leaf: read on this tape and not written from its first read there on (host set-up before is fine)
        leaves: list[ArrayInfo] = []
        first_on_tape: dict[int, int] = {}  # info.order -> op index of this tape's first read of it
        for op in taped_ops:
            for info in op.reads:
                if info.order in first_on_tape:
                    continue
                first_on_tape[info.order] = op.index
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
            # fresh parameters: leaves first read since the previous backward; a later window that reads none of
            # the window's parameters, only the state the earlier windows carried over (no leaf, or only
            # arrays read before), is not a new iteration
            fresh = any((i.first_read or 0) >= self.ops_at_backward and not i.taped_write for i in leaves) or (
                not leaves and not known)
            if not any(id(i) in known for i in leaves) and fresh or host_written:
                # a new iteration: fresh parameters, or parameters updated on the host
                if self.past_cap:
                    self.finish("cap")
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
        running = self.running_sum(loss)
        if len(self.verified) >= BACKWARD_CAP or self.fd_seconds > self.fd_budget():
            if self.window > 0 or len(self.verified) >= LOSS_ONLY_CAP:
                self.finish("cap")
            return self.loss_only(orig, tape, loss, grads, taped_ops, leaves, site, running)
        with self.paused():
            seeds, how = self.seeds(tape, loss, grads, taped_ops, leaves)
            since = self.tape_since.get(id(tape), 0)
            self.cut_chain.check(tape, since, leaves, [a for a, _ in seeds], frame)
            self.early_grad.check(tape, since, frame)
            self.tape_cover.check(tape, [a for a, _ in seeds], frame)
            objective = Objective(seeds, how)
            value = objective.value()
            before = {id(i): flat(i.arr.grad.numpy()).copy() for i in leaves}
            self.leftovers.before_backward()
            result = orig(tape, loss, grads)
            self.leftovers.after_backward(tape, site, self.is_array)
            ad = {id(i): flat(i.arr.grad.numpy()) - before[id(i)] for i in leaves}
            self.tracker_read.difference_update(id(a) for op in taped_ops for a in (x.arr for x in op.reads))
            entry = self.entry(site, value, how, running)
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
                job.tape, job.tape_reads = tape, first_on_tape
                self.pending.append(job)
        for info in leaves:
            if info not in self.window_params:
                self.window_params.append(info)
        self.verified.append(record)
        self.ops_at_backward = len(self.ops)
        self.backwards.append(entry)
        self.flush()
        return result

    def loss_only(self, orig: Callable, tape: Any, loss: Any, grads: Any, taped_ops: list[Op],
                  leaves: list[ArrayInfo], site: str, running: bool) -> Any:
        """A backward of the first iteration past the cap: the value of its objective, nothing compared. The
        iteration's end (its first parameter update, or a backward of a new iteration) then ends the run."""
        self.past_cap = True
        with self.paused():
            seeds, how = self.seeds(tape, loss, grads, taped_ops, leaves)
            value = Objective(seeds, how).value()
            result = orig(tape, loss, grads)
        entry = self.entry(site, value, how, running)
        entry["loss_only"] = True
        entry["note"] = f"past the first {BACKWARD_CAP} backwards of the iteration: run for its loss alone"
        for info in leaves:
            if info not in self.window_params:
                self.window_params.append(info)
        self.verified.append(BackwardRecord({}))
        self.backwards.append(entry)
        return result

    def entry(self, site: str, value: float | None, how: str, running: bool) -> dict[str, Any]:
        """A backward's record in the result: where, the value of its objective, and what that objective is."""
        entry: dict[str, Any] = {"site": site, "loss": value, "window": self.window, "params": []}
        if how != "loss":
            entry["objective"] = how
        if running:
            entry["running"] = True
        return entry

    def running_sum(self, loss: Any) -> bool:
        """Whether this backward's loss is the array the iteration's previous backward differentiated, written
        since only by taped kernel launches (no zero, fill, copy or host write between them): the windows add
        into one loss, so each backward sees the running sum (WF601's shared episode loss). A loss no traced
        operation has touched in this window (the windows before the first that adds to it: its value is
        still what the zero before them left) is unchanged, a running sum too."""
        previous = self.loss_mark
        self.loss_mark = (loss, len(self.ops), self.arrays) if loss is not None else None
        if loss is None or previous is None or previous[0] is not loss:
            return False
        info = self.arrays.get(id(loss))
        if info is None:  # untouched since the last backward, if the window's arrays were not dropped since
            return previous[2] is self.arrays and len(self.ops) >= previous[1]
        return info.arr is loss and all(
            self.ops[i].kind == "launch" and self.ops[i].tape is not None for i in info.writes_at if i >= previous[1])

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
        """WF902: arrays a taped launch read (and did not write) must be unchanged when backward starts. A
        copy's source may change: the copy's adjoint only adds the destination's gradient into the source's,
        it never reads the values (``wp.clone(x)`` handed to a reader, then ``x.zero_()``)."""
        current: dict[int, int] = {}
        with self.paused():
            for op in taped_ops:
                if op.kind == "copy":
                    continue
                for info in op.reads:
                    if info.order not in op.read_hash:
                        continue
                    if info in op.writes:
                        if read_and_overwritten_apart(op, info):
                            self._overwritten_by_itself(op, info, path, line, frame)
                        continue
                    slab = op.slab_hash.get(info.order)  # one slab read (``u[s, i, j]``): only it must stay
                    if slab is not None and digest(info.arr[slab[0]]) == slab[1]:
                        continue
                    if slab is None and info.order not in current:
                        current[info.order] = digest(info.arr)
                    if slab is None and current[info.order] == op.read_hash[info.order]:
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
                        writer=culprit.label, read_by=op.label,
                    )  # fmt: skip

    def family_of(self, info: ArrayInfo) -> str:
        """What groups findings about one array: its name without list indices, else its argument label."""
        if info.name.startswith("array#"):
            return info.label or "array"
        return family(info.name)

    def _overwritten_by_itself(self, op: Op, info: ArrayInfo, path: str, line: int, frame: Any) -> None:
        """WF902 for a launch handed one array as an input it reads and as an output it overwrites (``inputs=[z],
        outputs=[z]``): its own adjoint replays against the values it wrote."""
        self.resolve_name(info, frame)
        fam = self.family_of(info)
        msg = (f"the {op.label} at {op.path}:{op.line} reads `{info.name}` as one argument and overwrites it as "
               f"another, so its adjoint at the backward at {path}:{line} replays against the values it wrote")
        self.add_finding(
            "WF902", op.path, op.line, msg, ("WF902", op.path, op.line, op.label, fam),
            classified_as="WF103" if op.library else "WF106", library=op.library, array=info.name, family=fam,
            reader=f"{op.path}:{op.line}", backward=f"{path}:{line}", writer=op.label, read_by=op.label,
        )

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

    def nonzero_grads(self, infos: list[ArrayInfo]) -> list[tuple[ArrayInfo, float]]:
        """The arrays of ``infos`` whose ``.grad`` holds a non-zero value, each with its largest magnitude."""
        out: list[tuple[ArrayInfo, float]] = []
        with self.paused():
            for info in infos:
                g = info.arr.grad
                vals = flat(g.numpy()) if g is not None else None
                if vals is not None and np.any(vals != 0.0):
                    out.append((info, float(np.max(np.abs(vals)))))
        return out

    def check_left_adjoints(self, taped_ops: list[Op], seeded: list[Any], path: str, line: int) -> None:
        """WF903 on intermediates, at the first backward of the next iteration: an array this tape writes whose
        ``.grad`` is already non-zero holds the adjoint an earlier iteration's backward left there (Warp clears a
        gradient only at a store's adjoint, not at an accumulation's) and hands it on to what wrote the array.
        Only for ``backward(loss)``: one seeded by ``grads=`` or by hand sets such gradients on purpose."""
        seen = {id(a) for a in seeded}
        written = []
        for op in taped_ops:
            for info in op.writes:
                if id(info.arr) not in seen:
                    seen.add(id(info.arr))
                    written.append(info)
        stale = self.nonzero_grads(written)
        if not stale:
            return
        frame = self.user_frame()
        for info, _ in stale:
            self.resolve_name(info, frame)
        stale.sort(key=lambda item: (item[0].name.startswith("array#"), -item[1]))
        info, worst = stale[0]
        others = f" (and {len(stale) - 1} other array(s) this tape writes)" if len(stale) > 1 else ""
        msg = (
            f"`{info.name}.grad`{others} is already non-zero (max |g| = {worst:.4g}) when the next iteration's "
            "backward starts: an earlier backward left its adjoint there (the tape accumulates into the array, and "
            "only a store's adjoint clears a gradient), and this backward hands it on (missing tape.zero())"
        )
        self.add_finding("WF903", path, line, msg, ("WF903", path, line), classified_as="WF301",
                         array=info.name, intermediates=[i.name for i, _ in stale])  # fmt: skip

    def check_accumulated(self, params: list[ArrayInfo], path: str, line: int, used: set[int]) -> None:
        """WF903: the next iteration's backward must start from zero gradients (of the parameters it uses).
        One finding per backward: one missing ``tape.zero()`` leaves every gradient of the tape summed.

        Only a gradient the program consumes counts: of a parameter it trains, or one it read (on the host,
        by a launch or a copy). A leaf's gradient is read by no adjoint (the tape never writes the leaf), so
        the summed gradient of an initial state the program neither trains nor reads changes nothing."""
        with self.paused():
            consumed = [info for info in params if id(info.arr) in used and info.arr.grad is not None
                        and (info.trained or id(info.arr.grad) in self.grad_reads)]
        stale = self.nonzero_grads(consumed)
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
