"""Code shapes the host interpreter follows (blind corpus 2's misses): ``min``/``max``/``abs`` of known
ints, a ``@dataclass`` constructor, an ``if`` on a loop counter, a small accessor method. Each shape is
checked on the trace it produces and on the finding it lets a rule make; ``check`` only."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from warpfix.engine import parse_file, run_rules
from warpfix.finding import Finding, Severity
from warpfix.model import build_project
from warpfix.model.facts import Trace
from warpfix.model.library import LibraryIndex


@pytest.fixture
def index(tmp_path: Path) -> LibraryIndex:
    return LibraryIndex(cache_dir=str(tmp_path / "summaries"))


def _project(text: str, index: LibraryIndex | None = None):
    src, err = parse_file("prog.py", text)
    assert src is not None, err
    return build_project({"prog.py": src}, library=index)


def _findings(text: str, index: LibraryIndex) -> list[tuple[str, int, str]]:
    findings: list[Finding] = run_rules(_project(text, index))
    return sorted((f.rule, f.span.line, "error" if f.severity is Severity.ERROR else "other") for f in findings)


def _trace(text: str, root: str) -> Trace:
    return next(t for t in _project(text).traces if t.root == f"prog.py:{root}")


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


_STEP = """
import warp as wp

@wp.kernel
def step(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] + k[0] * x[i]

@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])
"""


# ---------------------------------------------------------------------------------------- min / max / abs
_SEGMENTS = _STEP + """
SEGMENT = 12

class Rollout:
    def __init__(self, steps=48):
        self.steps = steps
        self.x = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(steps + 1)]

    def run_segment(self, first, last, k):
        for t in range(first, last):
            wp.launch(step, 4, inputs=[self.x[t], k], outputs=[self.x[t + 1]])

def train():
    r = Rollout()
    k = wp.ones(1, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(3):
        for first in range(0, r.steps, SEGMENT):
            tape = wp.Tape()
            with tape:
                r.run_segment(first, min(first + SEGMENT, r.steps), k)
                if first + SEGMENT >= r.steps:
                    wp.launch(total, 4, inputs=[r.x[-1]], outputs=[loss])
            tape.backward(loss)

train()
"""


def test_a_window_ending_at_min_of_known_ints_is_a_window_of_known_steps(index: LibraryIndex) -> None:
    """``min(first + SEGMENT, r.steps)`` is a known int: the segment's loop runs its last step, which
    writes the state the next window's tape reads (blind corpus 2's swarm_route)."""
    assert ("WF601", _line(_SEGMENTS, "tape.backward"), "error") in _findings(_SEGMENTS, index)


def test_min_max_abs_of_known_ints_are_known_ints() -> None:
    code = _STEP + textwrap.dedent("""
    def main(n):
        xs = [wp.zeros(4) for _ in range(10)]
        k = wp.ones(1)
        wp.launch(step, 4, inputs=[xs[min(7, 3)], k], outputs=[xs[max(2, 8, 5)]])
        wp.launch(step, 4, inputs=[xs[abs(-3)], k], outputs=[xs[min(n, 8)]])
    """)
    launches = [e for e in _trace(code, "main").events if e.kind == "launch"]
    first, second = launches
    assert first.reads[0].id == second.reads[0].id  # xs[3] both times
    assert first.writes[0].id != second.writes[0].id  # xs[8], then an element ``min(n, 8)`` names


# ---------------------------------------------------------------------------------------- dataclasses
_DATACLASS = _STEP + """
from dataclasses import dataclass, field
import dataclasses

class Explicit:
    def step(self, a, k, b):
        wp.launch(step, 4, inputs=[a, k], outputs=[b])

class Damped:
    def step(self, a, k, b):
        pass

@dataclass
class Scene:
    solver: object
    gain: float = 2.0
    states: list = field(default_factory=list)

def episode():
    k = wp.ones(1, dtype=float, requires_grad=True)
    scene = Scene(solver=Explicit())
    scene.states = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(9)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(3):
        loss.zero_()
        for t in range(8):
            tape = wp.Tape()
            with tape:
                scene.solver.step(scene.states[t], k, scene.states[t + 1])
                wp.launch(total, 4, inputs=[scene.states[t + 1]], outputs=[loss])
            tape.backward(loss)

episode()
"""


def test_a_solver_handed_to_a_dataclass_by_keyword_is_the_one_stepped(index: LibraryIndex) -> None:
    """``Scene(solver=Explicit())`` of a ``@dataclass`` with no ``__init__``: ``scene.solver`` is that
    instance, so ``scene.solver.step(...)`` runs it (two classes define ``step``: no guess by name;
    blind corpus 2's beam_lift, with newton's solver)."""
    assert ("WF601", _line(_DATACLASS, "tape.backward"), "error") in _findings(_DATACLASS, index)


@pytest.mark.parametrize("decorator", ["@dataclass", "@dataclass()", "@dataclasses.dataclass",
                                       "@dataclasses.dataclass(eq=False)"])
def test_a_dataclass_binds_positional_and_keyword_arguments_then_defaults(decorator: str) -> None:
    code = _STEP + textwrap.dedent(f"""
    import dataclasses
    from dataclasses import InitVar, dataclass, field

    @dataclasses.dataclass
    class Base:
        a: object

    {decorator}
    class Pair(Base):
        b: object
        limit: int = 3
        count: dataclasses.InitVar[int] = 2
        extra: list = field(default_factory=list)
        shared: object = field(default=None)

        def __post_init__(self, count):
            self.out = wp.zeros(4)

    def main():
        x, y, z = wp.zeros(4), wp.zeros(4), wp.zeros(4)
        p = Pair(x, b=y)
        q = Pair(x, y, 5)
        wp.launch(step, 4, inputs=[p.a, p.b], outputs=[p.out])
        wp.launch(step, 4, inputs=[x, y], outputs=[z])
        p.extra.append(z)
        wp.launch(step, 4, inputs=[p.extra[0], q.b], outputs=[q.out])
        wp.launch(step, 4, inputs=[x, y], outputs=[z])
    """)
    launches = [e for e in _trace(code, "main").events if e.kind == "launch"]
    via_fields, direct, via_list, _ = launches
    assert [b.id for b in via_fields.reads] == [b.id for b in direct.reads]  # p.a is x, p.b is y
    assert via_fields.writes[0].id not in (direct.writes[0].id, via_list.writes[0].id)  # __post_init__'s
    assert [b.id for b in via_list.reads] == [direct.writes[0].id, direct.reads[1].id]  # extra[0] is z, q.b is y


def test_a_dataclass_with_its_own_init_or_init_false_runs_that() -> None:
    code = _STEP + textwrap.dedent("""
    from dataclasses import dataclass

    @dataclass
    class Own:
        a: object

        def __init__(self, a):
            self.a = wp.zeros(4)

    @dataclass(init=False)
    class NoInit:
        a: object

    def main():
        x = wp.zeros(4)
        o, n = Own(x), NoInit()
        wp.launch(step, 4, inputs=[o.a, n.a], outputs=[x])
    """)
    (launch,) = [e for e in _trace(code, "main").events if e.kind == "launch"]
    assert launch.reads[0].id != launch.writes[0].id and launch.reads[0].alloc == "zeros"
    assert launch.reads[1].alloc is None  # never bound: an unknown array


# ---------------------------------------------------------------------------------------- if on a counter
_LATE_FRAMES = _STEP + """
FRAMES = 24

class Scene:
    def __init__(self):
        self.x = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(FRAMES + 1)]
        self.tips = [wp.zeros(1, dtype=float, requires_grad=True) for _ in range(FRAMES)]

def frame_cost(scene, frame, loss):
    tip = scene.tips[0]  # one scratch buffer is enough
    tip.zero_()
    wp.launch(total, 4, inputs=[scene.x[frame + 1]], outputs=[tip])
    if frame >= FRAMES // 2:
        wp.launch(total, 1, inputs=[tip], outputs=[loss])

def main():
    scene = Scene()
    k = wp.ones(1, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    for it in range(3):
        tape.reset()
        with tape:
            for frame in range(FRAMES):
                wp.launch(step, 4, inputs=[scene.x[frame], k], outputs=[scene.x[frame + 1]])
                frame_cost(scene, frame, loss)
        tape.backward(loss)

main()
"""


def test_an_if_on_a_loop_counter_against_a_constant_is_decided(index: LibraryIndex) -> None:
    """``if frame >= FRAMES // 2:`` with ``frame`` a loop counter: decided at every pass, so the scratch
    buffer's read is recorded on the tape (an error), not a launch under an undecided ``if`` (a warning;
    blind corpus 2's beam_lift)."""
    assert _findings(_LATE_FRAMES, index) == [("WF105", _line(_LATE_FRAMES, "tip.zero_()"), "error")]


def _arms(code: str, root: str = "main") -> list[tuple[int, bool]]:
    """(pass, under an if's arm) of each ``zero`` event of the root's trace."""
    return [(e.loops[-1][1], bool(e.branches)) for e in _trace(code, root).events if e.kind == "zero"]


@pytest.mark.parametrize(("test", "taken"), [
    ("t >= N // 2", [False, False, False, True]),  # passes 0, 1, 2 and 23 of 24
    ("0 < t <= 2", [False, True, True, False]),
    ("t % 2 == 1 or t == 0", [True, True, False, True]),
    ("not (t < 1)", [False, True, True, True]),
    ("t != N - 1 and N > 3", [True, True, True, False]),
])
def test_comparisons_of_known_ints_decide_an_if(test: str, taken: list[bool]) -> None:
    code = textwrap.dedent(f"""
    import warp as wp
    N = 24

    def main():
        a = wp.zeros(1)
        for t in range(N):
            if {test}:
                a.zero_()
    """)
    assert _arms(code) == [(k, False) for k, took in enumerate(taken) if took]


@pytest.mark.parametrize("test", [
    "t == N // 2",  # 12 is not a pass the loop runs: the arm must still be seen
    "t > 20 and t < 23",
    "u == 5",  # a counter of an inner loop run once (the nesting is too deep to unroll)
])
def test_a_test_whose_outcome_only_skipped_iterations_have_stays_undecided(test: str) -> None:
    code = textwrap.dedent(f"""
    import warp as wp
    N = 24

    def main():
        a = wp.zeros(1)
        for t in range(N):
            for r in range(2):
                for s in range(2):
                    for u in range(8):
                        if {test}:
                            a.zero_()
    """)
    arms = _arms(code)
    assert arms and all(under_if for _, under_if in arms)


def test_a_test_on_a_counter_of_unknown_trip_count_or_a_count_kept_by_hand_stays_undecided() -> None:
    code = textwrap.dedent("""
    import warp as wp

    def main(n):
        a = wp.zeros(1)
        for t in range(n):
            if t >= 100:
                a.zero_()
        done = 0
        while done < n:
            done += 1
            if done > 50:
                a.fill_(1.0)
        for t in range(n):
            if t == 0:
                a.assign(a)
    """)
    events = [e for e in _trace(code, "main").events if e.kind in ("zero", "fill", "assign")]
    assert [(e.kind, bool(e.branches)) for e in events] == [("zero", True)] * 3 + [("fill", True)] * 3 + [
        ("assign", False)]


# ---------------------------------------------------------------------------------------- accessors
_ACCESSOR = """
import warp as wp
import warp.optim

@wp.kernel
def grow(p: wp.array(dtype=float), x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, p[i] * x[i] * x[i])

class Planner:
    def __init__(self):
        self.torque = wp.ones(4, dtype=float, requires_grad=True)
        self.x = wp.ones(4, dtype=float)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def parameters(self):
        \"\"\"What the optimizer trains.\"\"\"
        return [self.torque]

    def objective(self):
        wp.launch(grow, 4, inputs=[self.torque, self.x], outputs=[self.loss])
        return self.loss

def run(planner, optimizer):
    for it in range(3):
        tape = wp.Tape()
        with tape:
            loss = planner.objective()
        optimizer.step([p.grad for p in planner.parameters()])
        tape.backward(loss)
        tape.zero()

if __name__ == "__main__":
    planner = Planner()
    optimizer = warp.optim.SGD(planner.parameters(), lr=0.1)
    run(planner, optimizer)
"""


def test_a_small_accessor_returns_what_it_reads(index: LibraryIndex) -> None:
    """``planner.parameters()`` returns ``[self.torque]``: the optimizer steps that array and the list of
    gradients is read before the backward (blind corpus 2's attitude_slew)."""
    line = _line(_ACCESSOR, "optimizer.step(")
    assert _findings(_ACCESSOR, index) == [("WF303", line, "error"), ("WF304", line, "error")]


def test_only_a_return_of_names_attributes_and_displays_is_followed() -> None:
    code = _STEP + textwrap.dedent("""
    class Model:
        def __init__(self):
            self.a = wp.zeros(4)
            self.b = wp.zeros(4)

        def pair(self, other=None):
            return (self.a, other)

        def first(self):
            return [self.a, self.b][0]

        def made(self):
            return list([self.a])

        @property
        def state(self):
            return self.b

    def main():
        m = Model()
        k = wp.ones(1)
        wp.launch(step, 4, inputs=[m.pair()[0], m.first()], outputs=[m.state])
        wp.launch(step, 4, inputs=[m.a, m.made()[0]], outputs=[m.b])
    """)
    followed, direct = [e for e in _trace(code, "main").events if e.kind == "launch"]
    assert followed.reads[0].id == direct.reads[0].id  # m.pair()[0] is m.a
    assert followed.writes[0].id == direct.writes[0].id  # the property returns m.b
    assert followed.reads[1].id not in (direct.reads[0].id, direct.writes[0].id)  # a subscript: not followed
    assert direct.reads[1].id != direct.reads[0].id  # a call: not followed


CLOSURE = '''
import contextlib

import warp as wp


@wp.kernel
def step(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * k[i]


@contextlib.contextmanager
def recording():
    tape = wp.Tape()
    with tape:
        yield tape


def make_loss_fn(n):
    xs = [wp.ones(4, dtype=float, requires_grad=True) for _ in range(n + 1)]

    def advance(t, k):
        wp.launch(step, dim=4, inputs=[xs[t], k], outputs=[xs[t + 1]])

    def loss_fn(k):
        with recording() as tape:
            for t in range(n):
                advance(t, k)
        tape.backward(grads={xs[n]: wp.ones(4, dtype=float)})
        return tape

    return loss_fn


k = wp.ones(4, dtype=float, requires_grad=True)
loss_fn = make_loss_fn(3)
for it in range(3):
    tape = loss_fn(k)
    wp.launch(step, dim=4, inputs=[k, k.grad], outputs=[k])
'''


def test_a_closure_reads_its_enclosing_function_s_locals() -> None:
    """``loss_fn = make_loss_fn(...)``: the closure's free names (``xs``, ``advance``) are the factory's locals,
    so the launches it makes through ``advance`` are seen on the tape, and the missing ``tape.zero()`` of a
    gradient summed over the iterations is reported."""
    from warpfix.engine import check_sources

    result = check_sources({"main.py": CLOSURE}, select=["WF301"])
    assert [(f.rule, f.line) for f in result.findings] == [("WF301", CLOSURE.splitlines().index(
        "        tape.backward(grads={xs[n]: wp.ones(4, dtype=float)})") + 1)]
    fixed = CLOSURE.replace("    wp.launch(step, dim=4, inputs=[k, k.grad], outputs=[k])\n",
                            "    wp.launch(step, dim=4, inputs=[k, k.grad], outputs=[k])\n    tape.zero()\n")
    assert check_sources({"main.py": fixed}, select=["WF301"]).findings == []
