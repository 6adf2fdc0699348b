"""Gradient recorder of the mutation benchmark (loaded through ``sitecustomize`` on PYTHONPATH).

With ``MUTATE_RECORD=<file>`` set, every ``wp.Tape.backward`` of the program is wrapped: after
each of the first ``MUTATE_BACKWARDS`` (default 4) backwards it stores the loss values and the
gradient of every *leaf* of the tape, an array with ``requires_grad`` that a recorded launch reads
(positional or keyword ``inputs``, arrays held in structs included), that no recorded launch lists
as an output and that is not the loss (or a ``grads=`` seed) itself. A leaf is keyed by the hash of its dtype, shape and contents at that moment, so
the same parameter is found in two programs (the original and a mutant or its fix) whose
forward values agree, whatever their buffers are called. After the last recorded backward the
record is pickled and the process exits (the rest of the run cannot change what was recorded).

``wp.ScopedCapture`` is replaced by an eager stand-in whose ``graph`` is ``None``: on the CPU a
capture records the work without running it, and every program here falls back to eager calls
when it has no graph.
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

    class EagerCapture:
        """``wp.ScopedCapture`` that runs its body eagerly and captures nothing."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            self.graph = None
            self.active = False

        def __enter__(self) -> EagerCapture:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    wp.ScopedCapture = EagerCapture

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

    def leaves(tape: wp.Tape, seeds: list) -> dict[str, list[np.ndarray]]:
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
        found: dict[str, list[np.ndarray]] = {}
        for arr in read:
            if id(arr) in seen or id(arr) in written or not arr.requires_grad or arr.grad is None:
                continue
            seen.add(id(arr))
            grad = np.array(arr.grad.numpy(), dtype=np.float64).reshape(-1)
            found.setdefault(key(arr), []).append(grad)
        return found

    def dump() -> None:
        with open(RECORD, "wb") as f:
            pickle.dump(records, f)

    original = wp.Tape.backward

    def backward(self: wp.Tape, loss: wp.array | None = None, grads: dict | None = None) -> None:
        original(self, loss=loss, grads=grads)
        if len(records) >= limit:
            return
        wp.synchronize()
        seeds = [loss] if loss is not None else list(grads or {})
        values = [np.array(a.numpy(), dtype=np.float64).reshape(-1) for a in seeds]
        records.append({"loss": values, "leaves": leaves(self, seeds)})
        dump()
        if len(records) >= limit:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    wp.Tape.backward = backward
    dump()


if RECORD:
    _install()
