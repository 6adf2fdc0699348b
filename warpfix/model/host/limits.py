"""How far the host interpreter follows code: its budgets per root, per call and per loop."""

from __future__ import annotations

MAX_DEPTH = 6  # inlining depth
MAX_EVENTS = 5000  # per root
MAX_STEPS = 6000  # statements executed per root
CALL_STEPS = 1500  # statements one inlined call may execute; past that it counts as opaque
# passes of a loop: three consecutive iterations, so a buffer reused every second step (``states[t % 2]``,
# a state list repeating two buffers) is written by one pass, read by the next, overwritten by the third
LOOP_UNROLL = 3
MAX_PERIOD = 4  # ``xs[t % k]`` in a loop's body: k + 1 consecutive iterations, for k up to this
MAX_UNROLLED_LOOPS = 3  # loops nested deeper than this run their body once
#: apart from each other, the values a loop counter starts at when its ``range`` start is not known
UNKNOWN_START_STRIDE = 1 << 40
MAX_CONCAT = 4096  # ``a + b`` of lists with known lengths is followed element by element up to this length
CONCAT_PREFIX = 8  # ``a + b`` where ``b`` is a comprehension of unknown length: its elements taken at the ``+``
# ``[f(x) for x in xs]`` over a list of known length up to this is built element by element (each ``x`` bound);
# longer ones, and comprehensions over anything else, stay lazy (elements built on demand, ``x`` unknown)
MAX_EAGER_COMPREHENSION = 64
