"""Program shapes of real differentiable programs that the host model follows (issue 9 item 5): per-stage
buffers chosen by ``x if s == 0 else stages[s - 1]`` inside ``enumerate`` loops, and the planted bugs
of Warp's own examples that depend on them. ``check`` only: no Warp program runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from warpfix.engine import parse_file, run_rules
from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model import build_project
from warpfix.model.library import LibraryIndex


@pytest.fixture
def index(tmp_path: Path) -> LibraryIndex:
    return LibraryIndex(cache_dir=str(tmp_path / "summaries"))


def _check(text: str, index: LibraryIndex, name: str = "prog.py") -> list[Finding]:
    src, err = parse_file(name, text)
    assert src is not None, err
    return run_rules(build_project({name: src}, library=index))


def _errors(findings: list[Finding], rule: str | None = None) -> list[tuple[str, int]]:
    return [(f.rule, f.span.line) for f in findings
            if f.severity is Severity.ERROR and (rule is None or f.rule == rule)]


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


_KERNELS = '''
import warp as wp


@wp.kernel
def stage(c: float, base: wp.array(dtype=float), x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = base[i] + c * x[i] * x[i]


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])
'''

# the shape of warp/examples/optim/example_navier_stokes_perturbation.py: per-(step, stage) buffers,
# the stage input is the step's input at stage 0 and the previous stage's output after
RK_CLASS = _KERNELS + '''

class Example:
    def __init__(self, steps):
        self.steps = steps
        self.coeffs = [0.5, 0.25, 1.0]
        self.x0 = wp.ones(8, dtype=float, requires_grad=True)
        self.xs = [wp.zeros(8, dtype=float, requires_grad=True) for _ in range(steps + 1)]
        self.stages = []
        for _ in range(steps):
            per_stage = []
            for _ in range(3):
                per_stage.append(wp.zeros(8, dtype=float{rg}))
            self.stages.append(per_stage)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def forward(self):
        wp.copy(self.xs[0], self.x0)
        for t in range(self.steps):
            x_t = self.xs[t]
            for s, c in enumerate(self.coeffs):
                x_in = x_t if s == 0 else self.stages[t][s - 1]
                wp.launch(stage, dim=8, inputs=[c, x_t, x_in], outputs=[self.stages[t][s]])
            wp.copy(self.xs[t + 1], self.stages[t][2])
        wp.launch(total, dim=8, inputs=[self.xs[self.steps], self.loss])

    def step(self):
        self.tape = wp.Tape()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)
        self.tape.zero()
'''


def test_stage_buffers_follow_enumerate_and_conditional_input(index: LibraryIndex) -> None:
    buggy = RK_CLASS.format(rg="")
    assert _errors(_check(buggy, index), "WF201") == [("WF201", _line(buggy, "per_stage.append("))]
    assert _check(RK_CLASS.format(rg=", requires_grad=True"), index) == []


def test_enumerate_of_a_known_list_runs_every_item(index: LibraryIndex) -> None:
    text = _KERNELS + '''
coeffs = [0.5, 0.25, 1.0]
x = wp.ones(8, dtype=float, requires_grad=True)
outs = [wp.zeros(8, dtype=float, requires_grad=True) for _ in range(3)]
for s, c in enumerate(coeffs):
    src = x if s == 0 else outs[s - 1]
    wp.launch(stage, dim=8, inputs=[c, x, src], outputs=[outs[s]])
'''
    src, err = parse_file("prog.py", text)
    assert src is not None, err
    (trace,) = build_project({"prog.py": src}, library=index).traces
    launches = [ev for ev in trace.events if ev.kind == "launch"]
    assert len(launches) == 3
    # stage s reads x at s == 0 and the previous stage's output after
    assert launches[0].binding["x"].id == launches[0].binding["base"].id
    assert launches[1].binding["x"].id == launches[0].binding["y"].id
    assert launches[2].binding["x"].id == launches[1].binding["y"].id


def _warp_example(rel: str) -> str:
    spec = importlib.util.find_spec("warp")
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parent / "examples" / rel).read_text(encoding="utf-8")


def test_dropped_requires_grad_on_navier_stokes_stage_buffer(index: LibraryIndex) -> None:
    name = "example_navier_stokes_perturbation.py"
    text = _warp_example(f"optim/{name}")
    assert _errors(_check(text, index, name)) == []
    old = "stage_omega.append(wp.zeros((N_GRID, N_GRID), dtype=float, requires_grad=True))"
    assert old in text
    buggy = text.replace(old, "stage_omega.append(wp.zeros((N_GRID, N_GRID), dtype=float))")
    assert ("WF201", _line(buggy, "stage_omega.append(")) in _errors(_check(buggy, index, name))


_SQUARE = '''
import contextlib
from contextlib import contextmanager

import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])
'''

CM_HELPER = _SQUARE + '''

@contextmanager
def recording():
    tape = wp.Tape()
    with tape:
        yield tape
    print("recorded", len(tape.launches))


def train(x, loss):
    for _ in range(3):
        y = wp.zeros(8, dtype=float{rg})
        with recording() as tape:
            wp.launch(square, dim=8, inputs=[x], outputs=[y])
            wp.launch(total, dim=8, inputs=[y], outputs=[loss])
        tape.backward(loss)
        tape.zero()


train(wp.ones(8, dtype=float, requires_grad=True), wp.zeros(1, dtype=float, requires_grad=True))
'''

CM_CLASS = _SQUARE + '''

class Trainer:
    def __init__(self):
        self.x = wp.ones(8, dtype=float, requires_grad=True)
        self.y = wp.zeros(8, dtype=float{rg})
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()

    @contextlib.contextmanager
    def recording(self):
        self.tape.reset()
        with self.tape:
            yield self.tape

    def step(self):
        with self.recording() as tape:
            wp.launch(square, dim=8, inputs=[self.x], outputs=[self.y])
            wp.launch(total, dim=8, inputs=[self.y], outputs=[self.loss])
        tape.backward(self.loss)
        return self.x.grad
'''


@pytest.mark.parametrize("program", [CM_HELPER, CM_CLASS], ids=["helper", "class"])
def test_tape_opened_in_a_contextmanager_is_followed(program: str, index: LibraryIndex) -> None:
    buggy = program.format(rg="")
    assert _errors(_check(buggy, index), "WF201") == [("WF201", _line(buggy, "y = wp.zeros(8"))]
    assert _check(program.format(rg=", requires_grad=True"), index) == []


def test_with_body_runs_once_inside_the_generator_scope(index: LibraryIndex) -> None:
    text = CM_HELPER.format(rg=", requires_grad=True")
    src, err = parse_file("prog.py", text)
    assert src is not None, err
    traces = build_project({"prog.py": src}, library=index).traces
    events = [ev for t in traces for ev in t.events if ev.kind in ("launch", "tape_begin", "backward")]
    first = events[:4]
    assert [ev.kind for ev in first] == ["tape_begin", "launch", "launch", "backward"]
    assert first[1].recorded and first[2].recorded and first[1].tapes[0].tape == first[3].tape


def test_pure_builtins_are_no_array_events(index: LibraryIndex) -> None:
    """``dim=len(props)`` between two launches is not an op on ``props`` (it kept WF502 from seeing a
    repeated launch in newton's drone example); an unknown function handed an array still is."""
    text = _KERNELS + '''
x = wp.ones(8, dtype=float, requires_grad=True)
y = wp.zeros(8, dtype=float, requires_grad=True)
wp.launch(stage, dim=len(x), inputs=[1.0, x, x], outputs=[y])
for i in range(len(y)):
    print(isinstance(x, wp.array), str(x), x)
external_helper(y)
'''
    src, err = parse_file("prog.py", text)
    assert src is not None, err
    (trace,) = build_project({"prog.py": src}, library=index).traces
    calls = [ev.detail.get("callee") for ev in trace.events if ev.kind == "call"]
    assert sorted(set(calls)) == ["external_helper", "print"]


_FLAG_LOOP = '''
import warp as wp

@wp.kernel
def scale(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * k[0]

k = wp.ones(1, dtype=float, requires_grad=True)
for requires_grad in (False, True):
    x = wp.ones(4, dtype=float, requires_grad=requires_grad)
    y = wp.zeros(4, dtype=float, requires_grad=requires_grad)
    if requires_grad:
        with wp.Tape() as tape:
            wp.launch(scale, dim=4, inputs=[x, k], outputs=[y])
        tape.backward(grads={y: wp.ones(4, dtype=float)})
        print(k.grad.numpy())
    else:
        wp.launch(scale, dim=4, inputs=[x, k], outputs=[y])
'''


def test_a_branch_on_a_literal_loop_flag_takes_its_arm(index: LibraryIndex) -> None:
    """newton's tests/test_solver_xpbd.py: ``for requires_grad in (False, True): if requires_grad:``
    records and backs off once; running the taped arm in both iterations was a false WF301."""
    assert _errors(_check(_FLAG_LOOP, index)) == []
    twice = _FLAG_LOOP.replace("(False, True)", "(True, True)")
    assert _errors(_check(twice, index), "WF301") == [("WF301", _line(twice, "tape.backward"))]


_SAME_PTR = '''
import warp as wp

@wp.kernel
def step(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * k[0]

def solve(x_in, x_out, k, tmp):
    result = x_out
    wp.launch(step, dim=4, inputs=[x_in, k], outputs=[result])
    wp.launch(step, dim=4, inputs=[result, k], outputs=[tmp])
    if result.ptr != x_out.ptr:
        x_out.assign(result)

k = wp.ones(1, dtype=float, requires_grad=True)
a = wp.ones(4, dtype=float, requires_grad=True)
b = wp.zeros(4, dtype=float, requires_grad=True)
c = wp.zeros(4, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    solve(a, b, k, c)
tape.backward(grads={c: wp.ones(4, dtype=float)})
'''


def test_a_copy_guarded_by_a_same_pointer_test_is_not_run(index: LibraryIndex) -> None:
    """newton's SolverXPBD.step copies its result into state_out only ``if particle_q.ptr !=
    state_out.particle_q.ptr``: with one buffer on both sides the self-assign never runs (was WF101)."""
    assert _errors(_check(_SAME_PTR, index)) == []
    unguarded = _SAME_PTR.replace("    if result.ptr != x_out.ptr:\n        x_out", "    x_out")
    assert _errors(_check(unguarded, index), "WF101") == [("WF101", _line(unguarded, "x_out.assign"))]


_PING_PONG = '''
import warp as wp

@wp.kernel
def step(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * k[0]

@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])

k = wp.ones(1, dtype=float, requires_grad=True)
states = [wp.ones(4, dtype=float, requires_grad=True) for _ in range(6)]
states = [states[0]] + [states[1 + i % 2] for i in range(len(states) - 1)]
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    for t in range(3):
        wp.launch(step, dim=4, inputs=[states[t], k], outputs=[states[t + 1]])
    wp.launch(total, dim=4, inputs=[states[3]], outputs=[loss])
tape.backward(loss)
'''


def test_a_state_list_rebuilt_from_two_buffers_in_turn_is_a_ping_pong(index: LibraryIndex) -> None:
    """The mutation benchmark's ping-pong (``[s[0]] + [s[1 + i % 2] for i in range(len(s) - 1)]``):
    ``len`` of a known list, list concatenation and the comprehension's index per element."""
    step = _line(_PING_PONG, "wp.launch(step")
    assert ("WF104", step) in _errors(_check(_PING_PONG, index))
    fresh = _PING_PONG.replace("states = [states[0]] + [states[1 + i % 2] for i in range(len(states) - 1)]\n", "")
    assert _errors(_check(fresh, index)) == []


_MAYBE_LAUNCH = '''
import warp as wp

@wp.kernel
def clamp(q: wp.array(dtype=float), q_max: float):
    i = wp.tid()
    q[i] = wp.min(q[i], q_max)

@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])

class Solver:
    def step(self, model, q):
        if model.clamp_count:
            wp.launch(clamp, dim=4, inputs=[q, 1.0])

def run(model, solver):
    q = wp.ones(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        solver.step(model, q)
        wp.launch(total, dim=4, inputs=[q], outputs=[loss])
    tape.backward(loss)
'''


def test_a_launch_under_an_undecided_if_of_a_called_solver_is_not_known_taped(index: LibraryIndex) -> None:
    """newton's tests tape SolverXPBD.step on a model without tendons: the tendon and restitution
    kernels under ``if model.tendon_count:`` may never run on that tape (were 19 errors on newton);
    the same launch made unconditionally is taped."""
    findings = _check(_MAYBE_LAUNCH, index)
    assert [(f.rule, f.severity, f.data.get("taped")) for f in findings if f.rule == "WF106"] == [
        ("WF106", Severity.WARNING, False)]
    sure = _MAYBE_LAUNCH.replace("        if model.clamp_count:\n            wp.launch", "        wp.launch")
    assert [(f.rule, f.severity) for f in _check(sure, index) if f.rule == "WF106"] == [("WF106", Severity.ERROR)]


# In the shape of warp.fem's example_cantilever_topology_optimization.py: the objective nlopt calls
# returns a cached result when x did not change, and otherwise records the forward, then a second
# objective (the volume) on the same tape, backwarded after `tape.zero()`.
_EARLY_RETURN = '''
import numpy as np
import warp as wp


@wp.kernel
def filt(raw: wp.array(dtype=float), phys: wp.array(dtype=float)):
    e = wp.tid()
    phys[e] = raw[e] * 0.5


@wp.kernel
def volume_loss(density: wp.array(dtype=float), count: float, loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, density[wp.tid()] / count)


@wp.kernel
def compliance(density: wp.array(dtype=float), loss: wp.array(dtype=float)):
    d = density[wp.tid()]
    wp.atomic_add(loss, 0, d * d)


class Example:
    def __init__(self):
        self.raw = wp.zeros(8, dtype=float, requires_grad=True)
        self.physical = wp.zeros(8, dtype=float, requires_grad=True)
        self.last_x = None
        self.cached = None

    def evaluate(self, x):
        if self.last_x is not None and np.array_equal(x, self.last_x):
            return self.cached
        self.raw.assign(x)
        tape = wp.Tape()
        with tape:
            wp.launch(filt, dim=8, inputs=[self.raw], outputs=[self.physical])
        objective = wp.zeros(1, dtype=float, requires_grad=True)
        volume = wp.zeros(1, dtype=float, requires_grad=True)
        with tape:
            wp.launch(compliance, dim=8, inputs=[self.physical], outputs=[objective])
            wp.launch(volume_loss, dim=8, inputs=[self.physical, 8.0], outputs=[volume])
        tape.backward(objective)
        g_objective = self.raw.grad.numpy().copy()
        tape.zero()
        tape.backward(volume)
        g_volume = self.raw.grad.numpy().copy()
        tape.zero()
        self.last_x = x.copy()
        self.cached = (g_objective, g_volume)
        return self.cached
'''


def test_code_after_an_early_return_guard_is_followed(index: LibraryIndex) -> None:
    """`if cached: return cached` under an undecided test returns in one arm only: the rest of the
    method runs in the other (it was dropped, so nothing in it was checked)."""
    repeat = "            wp.launch(volume_loss, dim=8, inputs=[self.physical, 8.0], outputs=[volume])\n"
    buggy = _EARLY_RETURN.replace(repeat, repeat * 2)
    assert _errors(_check(buggy, index)) == [("WF502", _line(buggy, repeat) + 1)]
    guard_in_else = buggy.replace("            return self.cached\n",
                                  "            return self.cached\n        else:\n            pass\n")
    assert _errors(_check(guard_in_else, index)) == [("WF502", _line(guard_in_else, repeat) + 1)]


def test_a_second_objective_on_the_same_tape_is_not_work_after_the_loss(index: LibraryIndex) -> None:
    """The volume is recorded after the compliance and backwarded from the same tape after
    `tape.zero()`: moving it after the first backward would take it off the tape."""
    assert _check(_EARLY_RETURN, index) == []
    single = _EARLY_RETURN.replace("        tape.zero()\n        tape.backward(volume)\n", "")
    assert [f.rule for f in _check(single, index)] == ["WF302"]


_PARAM_DICT = _SQUARE + '''

@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def train():
    params = {"a": wp.ones(8, dtype=float, requires_grad=True), "b": wp.ones(8, dtype=float, requires_grad=True)}
    y = wp.zeros(8, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for _ in range(3):
        tape = wp.Tape()
        with tape:
            wp.launch(square, dim=8, inputs=[params["a"]], outputs=[y])
            wp.launch(total, dim=8, inputs=[y], outputs=[loss])
            wp.launch(total, dim=8, inputs=[params["b"]], outputs=[loss])
        tape.backward(loss)
        {update}
        {zero}


train()
'''


@pytest.mark.parametrize("update", [
    "for p in params.values():\n            wp.launch(sgd, dim=8, inputs=[p, p.grad, 0.1])",
    "for name, p in params.items():\n            wp.launch(sgd, dim=8, inputs=[p, p.grad, 0.1])",
    "for name in params:\n            wp.launch(sgd, dim=8, inputs=[params[name], params[name].grad, 0.1])",
], ids=["values", "items", "keys"])
def test_parameters_held_in_a_dict_are_iterated(update: str, index: LibraryIndex) -> None:
    """The blind corpus's oscillator_id: an SGD loop over ``params.values()`` and no ``tape.zero()``; a new tape
    per iteration, so only the update's consumption shows that the next backward sums into stale gradients."""
    buggy = _PARAM_DICT.replace("{update}", update).replace("{zero}", "")
    assert _errors(_check(buggy, index), "WF301") == [("WF301", _line(buggy, "tape.backward(loss)"))]
    fixed = _PARAM_DICT.replace("{update}", update).replace("{zero}", "tape.zero()")
    assert _check(fixed, index) == []



_STEP_IN_TAPE = _SQUARE + '''
import warp.optim


def train(params):
    y = wp.zeros(8, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    opt = warp.optim.Adam(list(params.values()), lr=0.1)
    for _ in range(3):
        tape = wp.Tape()
        with tape:
            wp.launch(square, dim=8, inputs=[params["a"]], outputs=[y])
            wp.launch(total, dim=8, inputs=[y], outputs=[loss])
            opt.step([p.grad for p in {over}])
        tape.backward(loss)
        tape.zero()


train({"a": wp.ones(8, dtype=float, requires_grad=True)})
'''


@pytest.mark.parametrize("over", ["params.values()", "[params['a']]"], ids=["dict-values", "list"])
def test_a_comprehension_over_a_known_list_binds_each_item(over: str, index: LibraryIndex) -> None:
    """The blind corpus's mlp_fit: ``opt.step([p.grad for p in self.params.values()])`` inside the tape; the
    comprehension's ``p`` is each parameter, so the optimizer reads their gradients before the backward (WF302)."""
    buggy = _STEP_IN_TAPE.replace("{over}", over)
    reads = [f for f in _check(buggy, index) if f.rule == "WF302" and "`p.grad` is read inside" in f.message]
    assert [(f.span.line, f.severity) for f in reads] == [(_line(buggy, "opt.step("), Severity.ERROR)]


_OPTIONAL_LOSS = _SQUARE + '''

@wp.kernel
def residual(x: wp.array(dtype=float), r: wp.array(dtype=float)):
    i = wp.tid()
    r[i] = x[i] * x[i] - 1.0


@wp.kernel
def squares(r: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, r[i] * r[i])


def rollout(xs, res=None, loss=None):
    for t in range(4):
        wp.launch(square, dim=8, inputs=[xs[t]], outputs=[xs[t + 1]])
        if loss is not None:
            wp.launch(residual, dim=8, inputs=[xs[t + 1]], outputs=[res[t]])
            wp.launch(squares, dim=8, inputs=[res[t]], outputs=[loss])


xs = [wp.ones(8, dtype=float, requires_grad=True) for _ in range(5)]
rollout(xs)
res = {res}
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    rollout(xs, res, loss)
tape.backward(loss)
'''


def test_a_none_default_parameter_decides_its_is_none_test(index: LibraryIndex) -> None:
    """The blind corpus's oscillator_id: ``rollout(..., loss=None)`` launches its residuals only under ``if loss
    is not None``; the taped call passes the loss, so those launches are taped, not conditional: the shared
    residual buffer (``[buf] * n``) is an error with a fix, not a warning about an undecided launch. It is
    reported where the list is built (WF103), though every pass reads and writes it as ``res[t]``: the
    same text names another slot at each pass."""
    buggy = _OPTIONAL_LOSS.replace("{res}", "[wp.zeros(8, dtype=float, requires_grad=True)] * 4")
    found = _check(buggy, index)
    assert _errors(found) == [("WF103", _line(buggy, "res = [wp.zeros"))]
    assert found[0].fix.safety is FixSafety.SAFE
    clean = _OPTIONAL_LOSS.replace("{res}", "[wp.zeros(8, dtype=float, requires_grad=True) for _ in range(4)]")
    assert _check(clean, index) == []
