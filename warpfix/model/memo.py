"""Values computed once per object and looked up by its identity (syntax nodes and kernel definitions:
many analyses ask about the same one, and hashing them by value would cost more than the answer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    """``compute(obj)`` once per object. Each entry holds its object, so its ``id`` is not reused while
    the entry lives; past ``limit`` entries all are forgotten (a language server checks for hours)."""

    __slots__ = ("_compute", "_entries", "_limit")

    def __init__(self, compute: Callable[[K], V], limit: int) -> None:
        self._compute = compute
        self._limit = limit
        self._entries: dict[int, tuple[K, V]] = {}

    def __call__(self, obj: K) -> V:
        hit = self._entries.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self._compute(obj)
        if len(self._entries) > self._limit:
            self._entries.clear()
        self._entries[id(obj)] = (obj, value)
        return value
