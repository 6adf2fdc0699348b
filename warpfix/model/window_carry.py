"""What one iteration window of a host loop carries into the next (WF601): the parameters a window
steps, and the buffers whose values flow from one window into the next."""

from __future__ import annotations

from warpfix.model.facts import Buffer, Event, Trace
from warpfix.model.tapeflow import DIFFERENTIABLE, outputs, true_reads


def window_params(window: list[Event]) -> dict[int, Buffer]:
    """Leaves of the window's recordings: read on a tape with a gradient, never written on it but by an
    optimizer step recorded there too (an op that writes an array from that array's own gradient: the
    step misplaced inside the tape is WF302's finding, and the array is still the parameter it trains)."""
    read: dict[int, Buffer] = {}
    written: set[int] = set()
    for ev in window:
        if ev.recorded and ev.kind in DIFFERENTIABLE:
            for b in true_reads(ev):
                root = b.root()
                if root.requires_grad and root.grad_of is None:
                    read.setdefault(root.id, root)
            stepped = {b.grad_of.root().id for b in ev.reads if b.grad_of is not None} | host_steps(window, ev)
            written.update(b.root().id for b in outputs(ev) if b.root().id not in stepped)
    return {k: v for k, v in read.items() if k not in written}


def host_steps(window: list[Event], ev: Event) -> set[int]:
    """The arrays ``ev`` writes in a statement that reads their own gradient on the host (``x.assign(x.numpy()
    - lr * x.grad.numpy())``): an update, not state a window computes."""
    if ev.kind not in ("assign", "copy"):
        return set()
    where = (ev.span.path, ev.span.line)
    grads = {b.grad_of.root().id for e in window if e.kind == "grad_read" and (e.span.path, e.span.line) == where
             for b in e.reads if b.grad_of is not None}
    return {b.root().id for b in ev.writes if b.root().id in grads}


def steps_parameters(events: list[Event], params: dict[int, Buffer]) -> bool:
    """Whether the parameters are updated between the windows (then the loop is a training loop), or
    their gradient goes to an opaque call (an optimizer's ``step``)."""
    for ev in events:
        if ev.kind in ("alloc", "clone"):
            continue
        if any(b.root().id in params for b in outputs(ev)):
            return True
        if ev.kind == "call" and any(
            b.grad_of is not None and b.grad_of.root().id in params for b in ev.reads
        ):
            return True
    return False


def carried_buffers(first: list[Event], second: list[Event]) -> tuple[Event, list[Buffer]] | None:
    """The first recorded op of the second window that reads state derived from the first window's
    recorded writes, with those buffers (None as soon as a launch of an unknown kernel could have
    rewritten it). The same op in the first window must read its counterpart from outside that
    window (the initial state): an input the first window produced itself is an intra-window
    intermediate whose second-window writer the model did not see."""
    tainted: set[int] = set()
    for ev in first:
        _propagate(ev, tainted, seed=ev.recorded and ev.kind in DIFFERENTIABLE and not host_steps(first, ev))
    for ev in second:
        if ev.kind == "launch" and ev.kernel is None:
            return None  # a kernel the model cannot see may rewrite the state: no verdict
        if ev.recorded and ev.kind in DIFFERENTIABLE:
            hit = [
                b
                for b in true_reads(ev)
                if b.root().id in tainted and b.grad_of is None and _from_outside(first, second, ev, b)
            ]
            if hit:
                return ev, hit
        _propagate(ev, tainted, seed=False)
    return None


def _set_up_in_first(first: list[Event], second: list[Event], counterpart: Buffer) -> bool:
    """Whether the first window wrote ``counterpart`` only by ops that the second window does not run (a
    set-up under ``if k == 0:``, ``sim.start()``): then it is the episode's initial state, not an intermediate
    whose second-window writer the model missed."""
    later = {(e.span, e.kind) for e in second}
    writers = [e for e in first if any(b.root().id == counterpart.root().id for b in outputs(e))]
    return bool(writers) and all((e.span, e.kind) not in later for e in writers)


def accumulated_seeds(window: list[Event], backward: Event) -> list[str]:
    """The arrays a loss-less backward is seeded through (``costs.grad.fill_(1.0)`` before it in the window)
    when the window only accumulates into them (atomics, ``+=``) and never overwrites, zeroes or rebinds
    them: their values then sum every window's costs, and one seeded backward after the loop is the
    gradient of that sum. Empty when the backward has a loss, or any seed is written otherwise."""
    if backward.reads or backward.detail.get("grads"):
        return []
    stop = window.index(backward)
    seeds: dict[int, str] = {}
    for ev in window[:stop]:
        if ev.kind == "grad_zero" and ev.detail.get("method") in ("fill_", "assign") and len(ev.writes) == 1 \
                and ev.writes[0].grad_of is not None:
            name = ev.name_of(ev.writes[0])
            seeds[ev.writes[0].grad_of.root().id] = name[: -len(".grad")] if name.endswith(".grad") else name
    accumulated = set()
    for ev in window:
        if any(b.root().id in seeds and b.grad_of is None for b in ev.writes):
            return []
        accumulated |= {b.root().id for b in ev.accums if b.root().id in seeds and ev.recorded}
    return sorted(seeds.values()) if seeds and accumulated == set(seeds) else []


def _from_outside(first: list[Event], second: list[Event], ev: Event, buf: Buffer) -> bool:
    """Whether the first window's run of ``ev``'s site read, in ``buf``'s place, an array that the first
    window had not written before it, or had written only in a set-up the later windows skip."""
    param = next((p for p, b in ev.binding.items() if b.id == buf.id), None)
    written: set[int] = set()
    for prev in first:
        if prev.span == ev.span and prev.kind == ev.kind:
            if param is not None and param in prev.binding:
                counterpart = prev.binding[param]
            else:
                position = next((i for i, b in enumerate(ev.reads) if b.id == buf.id), None)
                if position is None or position >= len(prev.reads):
                    return False
                counterpart = prev.reads[position]
            return counterpart.root().id not in written or _set_up_in_first(first, second, counterpart)
        written.update(b.root().id for b in outputs(prev))
    return False


def _propagate(ev: Event, tainted: set[int], *, seed: bool) -> None:
    """Update the set of buffers holding data derived from the first window after ``ev``."""
    if ev.kind in ("backward", "tape_zero", "tape_reset", "grad_zero", "grad_read", "tape_begin", "tape_end"):
        return
    derived = seed or any(b.root().id in tainted for b in true_reads(ev))
    for b in ev.writes:
        if b.grad_of is not None:
            continue
        if derived:
            tainted.add(b.root().id)
        else:
            tainted.discard(b.root().id)
    for b in ev.accums:
        if derived and b.grad_of is None:
            tainted.add(b.root().id)


def consumed_gradients(trace: Trace) -> set[int]:
    """The root ids of the arrays whose ``.grad`` the program reads."""
    return {
        b.grad_of.root().id
        for e in trace.events
        if e.kind == "grad_read"
        for b in e.reads
        if b.grad_of is not None
    }


def shown_params(trace: Trace, params: dict[int, Buffer]) -> str:
    """The summed parameters as the message names them: those whose ``.grad`` the program reads, else
    those the project allocates; a library model hands every window's tape dozens of arrays that merely
    ask for a gradient (``finalize().spring_indices``), which are counted, not listed."""
    consumed = consumed_gradients(trace)
    chosen = [p for k, p in params.items() if k in consumed] or [p for p in params.values() if p.origin is not None]
    if not chosen:
        return f"the {len(params)} arrays every window's tape reads"
    names = ", ".join(f"`{p.label}`" for p in chosen[:4])
    return names + (f" (and {len(chosen) - 4} more)" if len(chosen) > 4 else "")
