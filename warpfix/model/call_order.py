"""Where an operation that runs too early is placed when the training loop's order of calls is the cause.

A trainer's methods called in turn by a loop (``trainer.forward()``, ``trainer.apply()``, ``trainer.backward()``):
the optimizer step in ``apply()`` overwrites a parameter the tape read, and reads its gradient, before
``backward()`` runs. Inside ``apply()`` nothing is misplaced; the loop calls it too early. The finding belongs
at ``trainer.apply()``, and the fix moves that call after ``trainer.backward()`` and after the loop's other
gradient readers (a progress callback), as if the two methods' bodies were written in the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from warpfix.finding import Span
from warpfix.model.facts import Event
from warpfix.model.tapeflow import line_ref, tape_display_name


@dataclass(frozen=True)
class CallApart:
    """``ev``'s call in the frame that calls it and the backward apart: ``site`` (``trainer.apply()``),
    ``backward`` (``trainer.backward()``), and the lines of that frame's later statements reading a gradient."""

    site: Span
    backward: Span
    consumers: tuple[int, ...]

    def data(self) -> dict[str, object]:
        return {"backward_line": self.backward.line, "consumer_lines": list(self.consumers)}


def _common(a: tuple[Span, ...], b: tuple[Span, ...]) -> int:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def call_apart(events: list[Event], ev: Event, bwd: Event, recording: Event | None) -> CallApart | None:
    """When ``ev`` and the backward ``bwd`` each run inside a separate call made by one frame, and ``ev``'s call
    is not the one that records the tape (``recording``: its ``tape_begin``), that frame's view (see the module);
    None otherwise (``ev`` is then placed where it is, or at its call seen from the backward's function)."""
    k = _common(ev.call_stack, bwd.call_stack)
    if len(ev.call_stack) <= k or len(bwd.call_stack) <= k:
        return None
    site, backward = ev.call_stack[k], bwd.call_stack[k]
    if site.path != backward.path or site.line >= backward.line:
        return None
    if recording is not None and recording.call_stack[: k + 1] == ev.call_stack[: k + 1]:
        return None  # the same call records the tape: the operation belongs inside it
    prefix = ev.call_stack[:k]
    consumers: set[int] = set()
    start = events.index(bwd) + 1
    for later in events[start:]:
        if later.kind == "backward" and later.tape == bwd.tape:
            break
        if later.kind == "grad_read" and later.call_stack[:k] == prefix:
            where = later.call_stack[k] if len(later.call_stack) > k else later.span
            if where.path == site.path and where.line > backward.line:
                consumers.add(where.line)
    return CallApart(site, backward, tuple(sorted(consumers)))


def recording_of(events: list[Event], bwd: Event) -> Event | None:
    """The ``tape_begin`` of the last recording on ``bwd``'s tape before it."""
    idx = events.index(bwd)
    return next((e for e in reversed(events[:idx]) if e.kind == "tape_begin" and e.tape == bwd.tape), None)


def gradient_writes_after(events: list[Event], ev: Event, bwd: Event, owners: set[int]) -> list[int]:
    """Lines, in the frame that runs ``ev``, of the statements after the backward ``bwd`` that overwrite the
    gradient of an array in ``owners`` (a host clip, ``p.grad.assign(g * s)``, directly or in a call) before that
    tape's next backward, zero or reset: an update moved after the backward goes after them, where the gradient
    the iteration ends with is."""
    depth = len(ev.call_stack)
    frame = ev.call_stack
    lines: set[int] = set()
    for later in events[events.index(bwd) + 1:]:
        if later.tape == bwd.tape and later.kind in ("backward", "tape_zero", "tape_reset"):
            break
        if later.kind != "grad_zero" or later.detail.get("method") != "assign":
            continue
        if not any(b.grad_of is not None and b.grad_of.root().id in owners for b in later.writes):
            continue
        if later.call_stack[:depth] != frame:
            continue
        where = later.call_stack[depth] if len(later.call_stack) > depth else later.span
        if where.path == ev.span.path and where.line > bwd.span.line:
            lines.add(where.line)
    return sorted(lines)


def grad_write_data(events: list[Event], ev: Event, bwd: Event, owners: set[int],
                    apart: CallApart | None) -> dict[str, object]:
    """``grad_write_lines`` (:func:`gradient_writes_after`) for a finding's data, when ``ev`` is moved in its own
    frame (not a call moved apart) and such writes follow the backward."""
    if apart is not None or not owners:
        return {}
    lines = gradient_writes_after(events, ev, bwd, owners)
    return {"grad_write_lines": lines} if lines else {}


@dataclass(frozen=True)
class Resumed:
    """A generator's ``yield`` that runs its caller's loop body (the read or write ``ev``) before the generator's
    backward: where the finding goes, and what the fix (the backward moved before the yield) needs."""

    at: Span
    backward: Event
    ev: Event

    def opening(self) -> str:
        return (f"the generator yields to its caller's loop before its backward ({line_ref(self.backward.span, self.at)})"
                f": its loop body at {line_ref(self.ev.span, self.at)}")

    def data(self) -> dict[str, object]:
        return {"tape": tape_display_name(self.backward), "yield_line": self.at.line,
                "backward_line": self.backward.span.line}


def resumed_before(ev: Event, bwd: Event) -> Resumed | None:
    """The ``yield`` of a generator that runs ``ev``'s loop body (``for it in optimize(...)``) before the
    generator's own backward ``bwd``: the caller's step sees the gradient before the backward produces it, and
    the fix moves that backward before the yield. None when ``ev`` does not run at such a yield."""
    at = ev.detail.get("resumed_at")
    if not isinstance(at, Span) or at.path != bwd.span.path or at.line >= bwd.span.line:
        return None
    depth = len(ev.call_stack)
    if len(bwd.call_stack) <= depth or bwd.call_stack[:depth] != ev.call_stack:
        return None  # the backward does not run in a generator the read's frame called
    return Resumed(at, bwd, ev)
