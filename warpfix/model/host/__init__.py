"""Abstract interpretation of host code: what happens to which array, in which order, on which tape.

Every value the host code handles is a :class:`Val`: it can stand for an array (its
:class:`Buffer` is created the first time the value is used as one), an object whose
attributes are values, a list/dict whose items are values, a tape, a kernel, a project
function or class, or a small integer (loop counters, so ``states[i]`` and ``states[i + 1]``
resolve to distinct items). Attribute and item assignment mutate the shared value, so Python
aliasing (``states[0] = states[-1]``, ``a, b = b, a``) is modelled by construction.

Project functions, methods and constructors (a ``@dataclass``'s generated ``__init__`` too) are
inlined with their arguments bound, and a small accessor (``return [self.torque]``) gives what it
returns; loops run three consecutive iterations (more for an ``xs[t % k]`` rotation) and, with a
known trip count, the last one (see :func:`_passes`); both arms of an ``if`` run, each event tagged
with its arm, unless its test compares known ints (a test that varies with a loop's counter is
decided only where the passes run show every outcome it has: ``Varies``). Calls into an installed Warp-based package (newton, warp.fem, warp.optim) replay the effect summary derived from
the package's own source (:mod:`warpfix.model.library`): one event per library launch or copy, at
the user's call site, with ``detail["library"]`` naming the function. Other calls outside the
project are opaque: they read the arrays they receive and return fresh unknown values (never
assumed to write: a guess there would only produce false alarms).
"""

from warpfix.model.host.interpreter import HostInterpreter
from warpfix.model.host.summaries import library_interpreter, summarize
from warpfix.model.host.syntax import iter_roots
from warpfix.model.host.values import Val

__all__ = ["HostInterpreter", "Val", "iter_roots", "library_interpreter", "summarize"]
