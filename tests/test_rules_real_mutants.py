"""Planted bugs in real programs nobody on the team wrote (Warp's optim / fem examples, newton's diffsim
examples), each reported by ``check`` as an error of the right rule at the user's line; plus the same
shapes in small class-style and helper-style programs. ``check`` only: no Warp program runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from warpfix.engine import parse_file, run_rules
from warpfix.finding import Finding, FixSafety, Severity
from warpfix.fixes import compute_edits
from warpfix.model import build_project
from warpfix.model.library import LibraryIndex

HAS_NEWTON = importlib.util.find_spec("newton") is not None
needs_newton = pytest.mark.skipif(not HAS_NEWTON, reason="newton is not installed")


@pytest.fixture
def index(tmp_path: Path) -> LibraryIndex:
    return LibraryIndex(cache_dir=str(tmp_path / "summaries"))


def _check_files(files: dict[str, str], index: LibraryIndex) -> list[Finding]:
    parsed = {}
    for name, text in files.items():
        src, err = parse_file(name, text)
        assert src is not None, err
        parsed[name] = src
    return run_rules(build_project(parsed, library=index))


def _check(text: str, index: LibraryIndex, name: str = "prog.py") -> list[Finding]:
    return _check_files({name: text}, index)


def _errors(findings: list[Finding]) -> list[tuple[str, int]]:
    return [(f.rule, f.span.line) for f in findings if f.severity is Severity.ERROR]


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def _package_file(package: str, rel: str) -> str:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parent / rel).read_text(encoding="utf-8")


def _mutate(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


# ------------------------------------------------------------------------------------------ WF103
def test_repeated_list_of_arrays_in_navier_stokes(index: LibraryIndex) -> None:
    """``[wp.zeros(...)] * (T + 1)``: every time step is one array; the copy into the next step overwrites
    what the step's stages read. The list repetition is the cause (WF103), not the copy."""
    name = "example_navier_stokes_perturbation.py"
    text = _package_file("warp", f"examples/optim/{name}")
    old = "[wp.zeros((N_GRID, N_GRID), dtype=float, requires_grad=True) for _ in range(T + 1)]"
    buggy = _mutate(text, old, "[wp.zeros((N_GRID, N_GRID), dtype=float, requires_grad=True)] * (T + 1)")
    assert ("WF103", _line(buggy, "self.omega_timesteps = [")) in _errors(_check(buggy, index, name))


# ------------------------------------------------------------------------------------------ WF502
_ACCUM = '''
import warp as wp


@wp.kernel
def push(x: wp.array(dtype=float), f: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(f, i, 2.0 * x[i])


@wp.kernel
def total(f: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, f[wp.tid()] * f[wp.tid()])
'''

DUP_CLASS = _ACCUM + '''

class Sim:
    def __init__(self):
        self.x = wp.ones(8, dtype=float, requires_grad=True)
        self.f = wp.zeros(8, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def forces(self):
        wp.launch(push, dim=8, inputs=[self.x], outputs=[self.f])
{dup}
    def step(self):
        self.tape = wp.Tape()
        with self.tape:
            self.forces()
            wp.launch(total, dim=8, inputs=[self.f], outputs=[self.loss])
        self.tape.backward(self.loss)
        self.tape.zero()
'''

DUP_HELPER = _ACCUM + '''

def forces(x, f):
    wp.launch(push, dim=8, inputs=[x], outputs=[f])
{dup}

x = wp.ones(8, dtype=float, requires_grad=True)
f = wp.zeros(8, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    forces(x, f)
    wp.launch(total, dim=8, inputs=[f], outputs=[loss])
tape.backward(loss)
'''


@pytest.mark.parametrize(("program", "dup"), [
    (DUP_CLASS, "        wp.launch(push, dim=8, inputs=[self.x], outputs=[self.f])\n"),
    (DUP_HELPER, "    wp.launch(push, dim=8, inputs=[x], outputs=[f])\n"),
], ids=["class", "helper"])
def test_repeated_accumulating_launch(program: str, dup: str, index: LibraryIndex) -> None:
    buggy = program.format(dup=dup)
    first = _line(buggy, "wp.launch(push")
    found = [f for f in _check(buggy, index) if f.rule == "WF502"]
    assert [(f.span.line, f.severity) for f in found] == [(first + 1, Severity.ERROR)]
    # deleting a repeated accumulation changes the forward values: an unsafe fix, never a safe one
    assert found[0].fix.safety is FixSafety.UNSAFE
    assert _check(program.format(dup=""), index) == []
    assert compute_edits({"prog.py": buggy}, found).new_sources == {}
    assert "needs --unsafe-fixes" in compute_edits({"prog.py": buggy}, found).skipped[0][1]
    assert compute_edits({"prog.py": buggy}, found, unsafe=True).new_sources == {"prog.py": program.format(dup="")}


def test_repeated_accumulating_launch_in_fem_example(index: LibraryIndex) -> None:
    name = "example_elastic_shape_optimization.py"
    text = _package_file("warp", f"examples/fem/{name}")
    launch = '''            wp.launch(
                add_volume_loss,
                dim=1,
                inputs=(loss, vol, self._initial_volume, vol_loss_weight),
            )
'''
    buggy = _mutate(text, launch, launch + launch)
    second = _line(buggy, launch + launch) + launch.count("\n")
    assert ("WF502", second) in _errors(_check(buggy, index, name))


@needs_newton
def test_repeated_accumulating_launch_in_newton_drone(index: LibraryIndex) -> None:
    name = "example_diffsim_drone.py"
    text = _package_file("newton", f"examples/diffsim/{name}")
    launch = '''        wp.launch(
            compute_prop_wrenches,
            dim=len(drone.props),
            inputs=(
                drone.props,
                drone.control.prop_controls,
                drone.state.body_q,
                drone.model.body_com,
            ),
            outputs=(drone.state.body_f,),
        )
'''
    buggy = _mutate(text, launch, launch + launch)
    second = _line(buggy, launch + launch) + launch.count("\n")
    assert ("WF502", second) in _errors(_check(buggy, index, name))


# ------------------------------------------------------------------------------------------ WF601
@needs_newton
def test_per_frame_tape_in_newton_trainer(index: LibraryIndex) -> None:
    """A new tape per frame inside ``forward_backward()`` of newton's ball example (a class trainer whose
    loop runs in ``newton.examples.run``): the objective is truncated to the last frame."""
    name = "example_diffsim_ball.py"
    text = _package_file("newton", f"examples/diffsim/{name}")
    buggy = _mutate(text, '''    def forward_backward(self):
        self.tape = wp.Tape()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)
''', '''    def forward_backward(self):
        for sim_step in range(self.sim_steps):
            self.tape = wp.Tape()
            with self.tape:
                self.simulate(sim_step)
                if sim_step == self.sim_steps - 1:
                    wp.launch(loss_kernel, dim=1, inputs=[self.states[-1].particle_q, self.target, self.loss])
            self.tape.backward(self.loss)
''')
    found = [f for f in _check(buggy, index, name) if f.rule == "WF601" and f.severity is Severity.ERROR]
    assert [f.span.line for f in found] == [_line(buggy, "            self.tape.backward(self.loss)")]
    # the summed gradients named are those of arrays that have one, not every model array the solver reads
    assert "finalize()" not in found[0].message and "contacts()" not in found[0].message


# ------------------------------------------------------------------------------------------ WF202
_KERNELS = '''import warp as wp

{pre}

@wp.kernel
def square(x: wp.array[float], y: wp.array[float]):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def total(y: wp.array[float], loss: wp.array[float]):
    wp.atomic_add(loss, 0, y[wp.tid()])
'''

_MAIN = '''import warp as wp

{imports}


def train():
    x = wp.ones(8, dtype=float, requires_grad=True)
    y = wp.zeros(8, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernels.square, dim=8, inputs=[x], outputs=[y])
        wp.launch(kernels.total, dim=8, inputs=[y], outputs=[loss])
    tape.backward(loss)


train()
'''

_SETTINGS = "import warp as wp\n\nwp.config.enable_backward = False\n"


@pytest.mark.parametrize("layout", ["kernels-import-settings", "main-imports-settings-first"])
def test_backward_disabled_in_an_imported_module(layout: str, index: LibraryIndex) -> None:
    if layout == "kernels-import-settings":
        files = {"kernels.py": _KERNELS.format(pre="import settings  # noqa: F401\n"),
                 "main.py": _MAIN.format(imports="import kernels")}
    else:
        files = {"kernels.py": _KERNELS.format(pre=""),
                 "main.py": _MAIN.format(imports="import settings  # noqa: F401\nimport kernels")}
    files["settings.py"] = _SETTINGS
    assert ("WF202", 3) in [(f.rule, f.span.line) for f in _check_files(files, index)
                            if f.severity is Severity.ERROR and f.span.path == "settings.py"]
    # imported after the kernels' module was created: the kernels keep their adjoints
    late = {"kernels.py": _KERNELS.format(pre=""), "settings.py": _SETTINGS,
            "main.py": _MAIN.format(imports="import kernels\nimport settings  # noqa: F401")}
    assert not [f for f in _check_files(late, index) if f.rule == "WF202"]


# ------------------------------------------------------------------------------------------ WF304
_ZEROED = '''
import numpy as np
import warp as wp


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()] * x[wp.tid()])


def check_cleared(test):
    x = wp.ones(8, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(total, dim=8, inputs=[x, loss])
    tape.backward(loss)
    tape.zero()
    {read}
'''


@pytest.mark.parametrize(("read", "reported"), [
    ("test.assertEqual(x.grad.numpy()[0], 0.0)", False),
    ("np.testing.assert_array_equal(x.grad.numpy(), np.zeros(8))", False),
    ("assert x.grad.numpy()[3] == 0", False),
    ("print(x.grad.numpy()[0])", True),
    ("test.assertEqual(x.grad.numpy()[0], 2.0)", True),
])
def test_reading_a_cleared_gradient_to_assert_it_is_zero(read: str, reported: bool, index: LibraryIndex) -> None:
    text = _ZEROED.format(read=read)
    assert (("WF304", _line(text, read)) in _errors(_check(text, index))) is reported


def test_warp_fem_test_asserting_cleared_gradient(index: LibraryIndex) -> None:
    """warp's own test_fem_integrate reads ``scale.grad`` after ``tape2.zero()`` to assert it is 0 (seen now
    that ``fem.integrate`` puts ``values=`` arrays on the tape)."""
    name = "test_fem_integrate.py"
    text = _package_file("warp", f"tests/fem/{name}")
    assert "test.assertEqual(scale.grad.numpy()[0], 0.0)" in text
    assert not [e for e in _errors(_check(text, index, name)) if e[0] == "WF304"]


# ------------------------------------------------------------------------------------------ WF201
APPENDED_STATES = '''
import sys

import warp as wp


@wp.kernel
def advance(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] + k[0]


@wp.kernel
def reduce(x: wp.array(dtype=float), com: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(com, 0, x[i])


class Trainer:
    def __init__(self, frames):
        self.frames = frames
        self.substeps = 8
        self.k = wp.ones(1, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.states = []
        for _ in range(frames * self.substeps + 1):
            self.states.append(wp.zeros(8, dtype=float, requires_grad=True))
        self.coms = []
        for _ in range(frames):
            self.coms.append(wp.zeros(1, dtype=float{flag}))

    def forward(self, frame):
        for i in range(self.substeps):
            t = frame * self.substeps + i
            wp.launch(advance, dim=8, inputs=[self.states[t], self.k], outputs=[self.states[t + 1]])
        wp.launch(reduce, dim=8, inputs=[self.states[(frame + 1) * self.substeps]], outputs=[self.coms[frame]])
        wp.launch(reduce, dim=1, inputs=[self.coms[frame]], outputs=[self.loss])

    def step(self):
        self.tape = wp.Tape()
        with self.tape:
            for frame in range(self.frames):
                self.forward(frame)
        self.tape.backward(self.loss)


Trainer(int(sys.argv[1])).step()
'''


def test_missing_requires_grad_on_an_appended_list_element(index: LibraryIndex) -> None:
    """Lists filled by ``append`` in loops of unknown length (newton's bear): the state a frame's objective
    reads (``states[(frame + 1) * substeps]``) lies past the appended elements the unrolled passes built, and
    is built like them (with a gradient), so the per-frame objective allocated without one is reported."""
    buggy = APPENDED_STATES.format(flag="")
    assert _errors(_check(buggy, index)) == [("WF201", _line(buggy, "self.coms.append("))]
    assert _check(APPENDED_STATES.format(flag=", requires_grad=True"), index) == []


@needs_newton
def test_missing_requires_grad_in_newton_bear(index: LibraryIndex) -> None:
    name = "example_diffsim_bear.py"
    text = _package_file("newton", f"examples/diffsim/{name}")
    old = "self.coms.append(wp.zeros(1, dtype=wp.vec3, requires_grad=True))"
    buggy = _mutate(text, old, "self.coms.append(wp.zeros(1, dtype=wp.vec3))")
    assert ("WF201", _line(buggy, "self.coms.append(")) in _errors(_check(buggy, index, name))
    assert _errors(_check(text, index, name)) == []


def test_missing_requires_grad_through_a_staticmethod_allocator_in_navier_stokes(index: LibraryIndex) -> None:
    """Warp's navier-stokes example allocates its FFT buffers with ``self._allocate_poisson_fft_buffers(
    requires_grad=True)``, a @staticmethod called on ``self``: the flag reaches the helper's parameter, so the
    FFT chain carries gradients and the per-stage ``psi`` it writes, planted without one, is reported."""
    name = "example_navier_stokes_perturbation.py"
    text = _package_file("warp", f"examples/optim/{name}")
    old = "stage_psi.append(wp.zeros((N_GRID, N_GRID), dtype=float, requires_grad=True))"
    buggy = _mutate(text, old, "stage_psi.append(wp.zeros((N_GRID, N_GRID), dtype=float))")
    found = [f for f in _check(buggy, index, name) if f.severity is Severity.ERROR]
    assert [(f.rule, f.span.line) for f in found] == [("WF201", _line(buggy, "stage_psi.append("))]
    assert found[0].fix.safety is FixSafety.SAFE
    assert _errors(_check(text, index, name)) == []


def test_requires_grad_chosen_by_the_caller_is_not_fixed_in_the_helper(index: LibraryIndex) -> None:
    """``requires_grad=requires_grad`` in a helper its caller gave ``False``: reported at the helper's
    allocation, with no automatic edit (``True`` there would change the helper's other callers)."""
    text = _HELPER_FLAG
    found = _check(text, index)
    assert [(f.rule, f.span.line) for f in found] == [("WF201", _line(text, "return wp.zeros("))]
    assert found[0].fix.safety is FixSafety.NONE
    assert found[0].data["no_edit"] == "`requires_grad=requires_grad` is the caller's choice: pass `True` where it is called"
    assert compute_edits({"prog.py": text}, found, unsafe=True).new_sources == {}


_HELPER_FLAG = '''
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = k[0] * x[i]


def buffer(n, requires_grad=False):
    return wp.zeros(n, dtype=float, requires_grad=requires_grad)


x = wp.ones(8, dtype=float)
k = wp.ones(1, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
y = buffer(8)
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=8, inputs=[x, k], outputs=[y])
    wp.launch(scale, dim=1, inputs=[y, k], outputs=[loss])
tape.backward(loss)
'''


# ------------------------------------------------------------------------------------------ WF101
@needs_newton
def test_copy_writeback_into_the_solver_control_in_newton_bear(index: LibraryIndex) -> None:
    """``wp.copy`` into ``control.tet_activations``, which the solver's step read at the previous frame: the
    solver summary sees the caller's control (its ``if control is None:`` default is the model's)."""
    name = "example_diffsim_bear.py"
    text = _package_file("newton", f"examples/diffsim/{name}")
    old = "self.control.tet_activations = self.tet_activations[frame][: self.model.tet_count]"
    buggy = _mutate(text, old, "wp.copy(self.control.tet_activations, self.tet_activations[frame][: self.model.tet_count])")
    assert ("WF101", _line(buggy, "wp.copy(self.control")) in _errors(_check(buggy, index, name))


@needs_newton
def test_a_reset_between_a_taped_write_and_its_reader_in_newton_bear(index: LibraryIndex) -> None:
    """A held-out mutant: `self.coms[frame].zero_()` between the launch that accumulates the centre of
    mass and the loss that reads it. Nothing read it before the reset, but the loss reads the zeros while
    the tape credits `com_kernel` with them."""
    name = "example_diffsim_bear.py"
    text = _package_file("newton", f"examples/diffsim/{name}")
    old = "        # compute loss\n"
    buggy = _mutate(text, old, "        self.coms[frame].zero_()\n\n" + old)
    found = [f for f in _check(buggy, index, name) if f.rule == "WF105"]
    assert [(f.span.line, f.severity) for f in found] == [(_line(buggy, "self.coms[frame].zero_()"), Severity.ERROR)]
    assert "which kernel `com_kernel` (parameter `com`)" in found[0].message
    assert _errors(_check(text, index, name)) == []


def test_a_reset_between_a_taped_write_and_its_reader_in_warp_diffray(index: LibraryIndex) -> None:
    name = "example_diffray.py"
    text = _package_file("warp", f"examples/optim/{name}")
    old = "        # downsample\n"
    buggy = _mutate(text, old, "        self.rays.zero_()\n\n" + old)
    assert ("WF105", _line(buggy, "self.rays.zero_()")) in _errors(_check(buggy, index, name))
    assert [r for r, _ in _errors(_check(text, index, name))] == ["WF403"]  # the Lambert loop (round 10)
