"""Gradient recorder of the mutation benchmark (loaded through ``sitecustomize`` on PYTHONPATH).

With ``MUTATE_RECORD=<file>`` set, every ``wp.Tape.backward`` of the program is wrapped: after
each of the first ``MUTATE_BACKWARDS`` (default 4) backwards it stores the loss values and the
gradient of every *leaf* of the tape, an array with ``requires_grad`` that a recorded launch reads
(positional or keyword ``inputs``, arrays held in structs included), that no recorded launch lists
as an output and that is not the loss (or a ``grads=`` seed) itself. A leaf is keyed by the hash of its dtype, shape and contents at that moment, so
the same parameter is found in two programs (the original and a mutant or its fix) whose
forward values agree, whatever their buffers are called; the keys of leaves that carry
``retain_grad`` (or view an array that does) are kept beside them (``"retained"``). After the last recorded backward the
record is pickled and the process exits (the rest of the run cannot change what was recorded).

A backward with neither ``loss=`` nor ``grads=`` (seeded by hand: ``cost.grad.fill_(1.0)``, a
manual adjoint launch) has no loss to record; its forward value is then the contents of the arrays
it was seeded through (``"seeded"``): those a recorded launch writes and none reads, whose gradient
is non-zero when the backward starts (only a seed gives such an array a gradient; the backward
zeroes it), sorted by content. Inside a capture the gradients at the graph's backward are not
known: there every array with ``requires_grad`` that a recorded launch writes and none reads counts.

A backward inside a ``wp.ScopedCapture`` block runs nothing (on the CPU too, a capture only records
work into a graph): it is recorded after each ``wp.capture_launch`` of that graph, when the graph
has run it, its leaves keyed by their contents before the launch. The program keeps its own
capture semantics.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys

RECORD = os.environ.get("MUTATE_RECORD")


def _install() -> None:
    import numpy as np
    import warp as wp

    limit = int(os.environ.get("MUTATE_BACKWARDS", "4"))
    records: list[dict] = []

    # A backward inside ``wp.ScopedCapture`` only records work into a graph (on the CPU too); it is
    # recorded when ``wp.capture_launch`` of that graph has run it.
    capture = {"open": None}
    graphs: dict[int, list] = {}
    scoped_capture, capture_launch = wp.ScopedCapture, wp.capture_launch

    class RecordingCapture(scoped_capture):
        """``wp.ScopedCapture`` that remembers which backwards its graph contains."""

        def __enter__(self) -> RecordingCapture:
            capture["open"] = []
            try:
                return super().__enter__()
            except BaseException:
                capture["open"] = None
                raise

        def __exit__(self, *exc: object) -> None:
            try:
                super().__exit__(*exc)
            finally:
                pending, capture["open"] = capture["open"], None
                if self.graph is not None:
                    graphs[id(self.graph)] = pending

    def launch_graph(graph: object, *args: object, **kwargs: object) -> None:
        # leaves are keyed by their contents before the graph runs: work the graph does after its
        # backward (an optimizer step moved there) must not change which leaf is which
        pending = [(tape, seeds, {id(a): key(a) for a in candidates(tape, seeds)}) for tape, seeds in
                   graphs.get(id(graph), [])]
        capture_launch(graph, *args, **kwargs)
        for tape, seeds, keys in pending:
            note(tape, seeds, keys)

    wp.ScopedCapture = RecordingCapture
    wp.capture_launch = launch_graph

    def arrays_in(value: object, out: list) -> None:
        if isinstance(value, wp.array):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                arrays_in(item, out)
        elif hasattr(value, "_cls") and hasattr(value._cls, "vars"):
            for name in value._cls.vars:
                arrays_in(getattr(value, name, None), out)

    def key(arr: wp.array) -> str:
        data = np.ascontiguousarray(arr.numpy())
        digest = hashlib.sha1(f"{arr.dtype}{arr.shape}".encode() + data.tobytes()).hexdigest()
        return digest[:16]

    def candidates(tape: wp.Tape, seeds: list) -> list:
        """The tape's leaves: read by a recorded launch, never listed as an output, not a seed."""
        read: list = []
        written: set[int] = {id(a) for a in seeds}
        for launch in tape.launches:
            if not isinstance(launch, (list, tuple)) or len(launch) < 5:
                continue
            arrays_in(launch[3], read)
            outs: list = []
            arrays_in(launch[4], outs)
            written.update(id(a) for a in outs)
        seen: set[int] = set()
        out = []
        for arr in read:
            if id(arr) in seen or id(arr) in written or not arr.requires_grad or arr.grad is None:
                continue
            seen.add(id(arr))
            out.append(arr)
        return out

    def leaves(tape: wp.Tape, seeds: list, keys: dict[int, str] | None) -> tuple[dict[str, list[np.ndarray]], list[str]]:
        """(gradients by leaf key, the keys of the leaves that carry ``retain_grad``)."""
        found: dict[str, list[np.ndarray]] = {}
        retained: list[str] = []
        for arr in candidates(tape, seeds):
            grad = np.array(arr.grad.numpy(), dtype=np.float64).reshape(-1)
            name = (keys.get(id(arr)) if keys is not None else None) or key(arr)
            found.setdefault(name, []).append(grad)
            if retains(arr):
                retained.append(name)
        return found, retained

    def retains(arr: object) -> bool:
        """``retain_grad`` on the array or on the array it views (``reshape``, ``flatten``: the view's
        gradient is the retained one, seen through the view)."""
        while isinstance(arr, wp.array):
            if arr.retain_grad:
                return True
            arr = getattr(arr, "_ref", None)
        return False

    def seeded(tape: wp.Tape, by_grad: bool) -> list[wp.array]:
        """The arrays a hand-seeded backward starts from (see the module docstring)."""
        read: list = []
        written: list = []
        for launch in tape.launches:
            if isinstance(launch, (list, tuple)) and len(launch) >= 5:
                arrays_in(launch[3], read)
                arrays_in(launch[4], written)
        reads = {id(a) for a in read}
        found: dict[int, wp.array] = {}
        for arr in written:
            if id(arr) in reads or not arr.requires_grad or arr.grad is None:
                continue
            if not by_grad or np.any(arr.grad.numpy()):
                found.setdefault(id(arr), arr)
        return sorted(found.values(), key=key)

    def dump() -> None:
        with open(RECORD, "wb") as f:
            pickle.dump(records, f)

    def values(arrays: list) -> list[np.ndarray]:
        return [np.array(a.numpy(), dtype=np.float64).reshape(-1) for a in arrays]

    def note(tape: wp.Tape, seeds: list, keys: dict[int, str] | None = None, by_hand: list | None = None) -> None:
        if len(records) >= limit:
            return
        wp.synchronize()
        found, retained = leaves(tape, seeds, keys)
        if by_hand is None:
            by_hand = [] if seeds else seeded(tape, by_grad=False)
        record = {"loss": values(seeds), "leaves": found, "retained": retained, "seeded": values(by_hand)}
        records.append(record)
        dump()
        if len(records) >= limit:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    original = wp.Tape.backward

    def backward(self: wp.Tape, loss: wp.array | None = None, grads: dict | None = None) -> None:
        seeds = [loss] if loss is not None else list(grads or {})
        captured = capture["open"] is not None
        by_hand = [] if seeds or captured or len(records) >= limit else seeded(self, by_grad=True)
        original(self, loss=loss, grads=grads)
        if captured:
            capture["open"].append((self, seeds))
        else:
            note(self, seeds, by_hand=by_hand)

    wp.Tape.backward = backward
    dump()


if RECORD:
    _install()
