"""Memory spans of Warp arrays, and an index that finds the arrays over a span without a full scan.

Part of the probe package (relative imports only, needs only warp and numpy): the probe asks "does
this view share memory with an array of the window?" at every launch, and newton's programs touch
thousands of arrays per iteration (many of them zero-size), so a scan per question is quadratic.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from typing import Any

#: (device, first byte, end byte) of the memory an array view spans.
Span = tuple[Any, int, int]


def mem_range(arr: Any) -> Span | None:
    """(device, first byte, end byte) of the memory an array view spans; None without memory."""
    if arr.ptr is None:
        return None
    from warp._src.types import type_size_in_bytes  # noqa: PLC0415

    last = sum((s - 1) * abs(st) for s, st in zip(arr.shape, arr.strides, strict=True))
    return arr.device, arr.ptr, arr.ptr + last + type_size_in_bytes(arr.dtype)


def overlap(a: Span | None, b: Span | None) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return False
    return a[1] < b[2] and b[1] < a[2]


class SpanIndex:
    """Items keyed by memory span; :meth:`overlapping` yields those whose span overlaps a given one.

    Spans are kept sorted by first byte per device. A span that overlaps ``[first, end)`` starts before
    ``end`` and no earlier than ``first - longest`` (the longest span held), so a query scans only the
    spans that start in that window, not every span held.
    """

    def __init__(self) -> None:
        self._starts: dict[str, list[int]] = {}  # per device name: sorted first bytes
        self._entries: dict[str, list[tuple[int, Any]]] = {}  # per device name, parallel to _starts: (end, item)
        self._longest = 0

    def add(self, span: Span | None, item: Any) -> None:
        if span is None:
            return
        device, first, end = span
        key = str(device)  # Warp devices are not hashable
        starts = self._starts.setdefault(key, [])
        at = bisect.bisect_right(starts, first)
        starts.insert(at, first)
        self._entries.setdefault(key, []).insert(at, (end, item))
        self._longest = max(self._longest, end - first)

    def overlapping(self, span: Span | None) -> Iterator[Any]:
        """The items whose span overlaps ``span`` (none for an array without memory)."""
        if span is None:
            return
        device, first, end = span
        starts = self._starts.get(str(device))
        if not starts:
            return
        entries = self._entries[str(device)]
        lowest = first - self._longest
        for j in range(bisect.bisect_left(starts, end) - 1, -1, -1):
            if starts[j] < lowest:
                break
            if entries[j][0] > first:
                yield entries[j][1]

    def any_overlap(self, span: Span | None) -> bool:
        return next(self.overlapping(span), None) is not None

    def at_address(self, ptr: int) -> Iterator[Any]:
        """The items whose span (on any device) holds the byte at ``ptr``."""
        for key in list(self._starts):
            yield from self.overlapping((key, ptr, ptr + 1))

    def starts_within(self, first: int, end: int) -> bool:
        """True when a span (on any device) starts in ``[first, end)``: memory being freed holds it."""
        for starts in self._starts.values():
            at = bisect.bisect_left(starts, first)
            if at < len(starts) and starts[at] < end:
                return True
        return False


def with_aliases(infos: list[Any], ids: set[int]) -> set[int]:
    """``ids`` (of ArrayInfo objects) and every array sharing memory with one of them (views, ``ptr=``
    aliases of another dtype): restoring one of them alone would leave the others' contents behind."""
    out = set(ids)
    spans = sorted(((i.span[1], i.span[2], i) for i in infos if i.span is not None), key=lambda s: s[:2])
    group: list[Any] = []
    end = -1
    for first, last, info in [*spans, (math.inf, math.inf, None)]:
        if first >= end:  # a run of overlapping memory ends
            if len(group) > 1 and any(id(g) in ids for g in group):
                out.update(id(g) for g in group)
            group, end = [], last
        if info is not None:
            group.append(info)
            end = max(end, last)
    return out
