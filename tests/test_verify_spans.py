"""The probe's memory-span index: the arrays over a span, found without scanning every array."""

from __future__ import annotations

import random

from warpfix.verify.spans import SpanIndex, overlap


def test_overlapping_matches_a_full_scan():
    rng = random.Random(0)
    spans = []
    for k in range(400):
        first = rng.randrange(0, 100_000)
        length = rng.choice([4, 16, 64, 4000]) if k % 50 else 30_000  # a few long arrays among small ones
        spans.append((rng.choice(["cpu", "cuda:0"]), first, first + length))
    index = SpanIndex()
    for k, span in enumerate(spans):
        index.add(span, k)
    for _ in range(300):
        first = rng.randrange(0, 100_000)
        query = (rng.choice(["cpu", "cuda:0"]), first, first + rng.choice([1, 8, 500]))
        want = {k for k, span in enumerate(spans) if overlap(span, query)}
        assert set(index.overlapping(query)) == want
        assert index.any_overlap(query) == bool(want)


def test_no_memory_overlaps_nothing_and_touching_ends_do_not_overlap():
    index = SpanIndex()
    index.add(None, "zero-size")
    index.add(("cpu", 100, 200), "a")
    assert list(index.overlapping(None)) == []
    assert list(index.overlapping(("cpu", 200, 300))) == []  # [100, 200) and [200, 300) share no byte
    assert list(index.overlapping(("cpu", 199, 300))) == ["a"]
    assert list(index.overlapping(("cuda:0", 150, 160))) == []  # same addresses on another device
    assert list(index.at_address(150)) == ["a"]
    assert index.starts_within(100, 101) and not index.starts_within(101, 200)
