"""Code shapes the host model follows (blind corpus 4's false alarms on correct programs): a model held in a
``types.SimpleNamespace``, rollout windows whose ``range`` start the model cannot evaluate, a history kept as
slabs of one ``wp.array3d``, and a training loop that is a generator the caller resumes. Each correct shape
gets no finding; a look-alike with the bug still gets its rule."""

from __future__ import annotations

from warpfix.engine import parse_file, run_rules
from warpfix.finding import Severity
from warpfix.model import build_project


def _errors(text: str) -> list[tuple[str, int]]:
    src, err = parse_file("prog.py", text)
    assert src is not None, err
    findings = run_rules(build_project({"prog.py": src}))
    return sorted((f.rule, f.span.line) for f in findings if f.severity is Severity.ERROR)


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


_SQUARE = """
import warp as wp
from types import SimpleNamespace

@wp.kernel
def step(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]
"""

_WINDOWS = _SQUARE + """
def make_model(windows=3, spw=20):
    return SimpleNamespace(windows=windows, spw=spw, steps=windows * spw, x0=wp.ones(4))

def run_window(model, xs, w):
    t0 = w * model.spw
    for t in range(t0, t0 + model.spw):
        wp.launch(step, dim=4, inputs=[xs[SRC]], outputs=[xs[t + 1]])

model = make_model()
xs = [wp.zeros(4, requires_grad=True) for _ in range(model.steps + 1)]
for it in range(3):
    tape = wp.Tape()
    with tape:
        wp.copy(xs[0], model.x0)
        for w in range(model.windows):
            run_window(model, xs, w)
    tape.backward(xs[-1])
    tape.zero()
"""


def test_namespace_windows_each_step_own_buffer() -> None:
    """``SimpleNamespace(windows=3, spw=20)`` holds known ints: window ``w`` steps ``xs[20 w]`` to
    ``xs[20 w + 20]``, each buffer written once."""
    assert _errors(_WINDOWS.replace("SRC", "t")) == []


def test_namespace_windows_ring_still_found() -> None:
    """The same windows stepping through a two-buffer ring (``xs[t % 2]`` to ``xs[(t + 1) % 2]``) overwrite
    what earlier steps read."""
    text = _WINDOWS.replace("inputs=[xs[SRC]], outputs=[xs[t + 1]]", "inputs=[xs[t % 2]], outputs=[xs[(t + 1) % 2]]")
    assert ("WF104", _line(text, "wp.launch(step")) in _errors(text)


def test_unknown_window_start_names_other_elements() -> None:
    """A model the interpreter does not follow (an opaque ``make_model`` without arrays): ``range(t0, t0 + n)``
    starts at an unknown ``t0`` in each window, so the windows' counters name other elements of ``xs``."""
    text = _WINDOWS.replace("SRC", "t").replace(", x0=wp.ones(4))", ")").replace("wp.copy(xs[0], model.x0)", "pass")
    assert _errors(text) == []


_HISTORY = """
import warp as wp

@wp.kernel
def advance(u: wp.array3d(dtype=float), s_in: int, u_out: wp.array3d(dtype=float), s_out: int):
    i, j = wp.tid()
    c = u[s_in, i, j]
    u_out[s_out, i, j] = c * c

@wp.kernel
def misfit(u: wp.array3d(dtype=float), s: int, loss: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(loss, 0, u[s, i, j] * u[s, i, j])

u = wp.zeros((11, 4, 4), dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
for it in range(3):
    tape = wp.Tape()
    with tape:
        for w in range(2):
            for t in range(5 * w, 5 * w + 5):
                wp.launch(advance, dim=(4, 4), inputs=[u, t], outputs=[u, OUT])
            wp.launch(misfit, dim=(4, 4), inputs=[u, 5 * w + 5], outputs=[loss])
    tape.backward(loss)
    tape.zero()
"""


def test_history_slabs_are_apart() -> None:
    """``u[s_in, i, j]`` read and ``u_out[s_out, i, j]`` written, ``s_out = t + 1``: each launch writes a slab
    no earlier launch read."""
    assert _errors(_HISTORY.replace("OUT", "t + 1")) == []


def test_history_slab_written_under_its_own_read_still_found() -> None:
    """``s_out = t``: the launch overwrites the slab it reads (and later ones read)."""
    text = _HISTORY.replace("OUT", "t")
    assert any(rule in ("WF104", "WF106") for rule, _ in _errors(text))


_GENERATOR = """
import numpy as np
import warp as wp
import warp.optim

@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]

@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])

def optimize(x, y, loss, iters):
    for it in range(iters):
        loss.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(square, dim=4, inputs=[x], outputs=[y])
            wp.launch(total, dim=4, inputs=[y], outputs=[loss])
        tape.backward(loss)
        yield it, float(loss.numpy()[0])
        ZERO

def main():
    x = wp.array(np.ones(4, dtype=np.float32), requires_grad=True)
    y = wp.zeros(4, requires_grad=True)
    loss = wp.zeros(1, requires_grad=True)
    opt = warp.optim.SGD([x], lr=0.1)
    for it, value in optimize(x, y, loss, 5):
        print(it, value)
        opt.step([x.grad])

main()
"""


def test_generator_loop_body_runs_at_the_yield() -> None:
    """The caller's step runs at the generator's ``yield``: after the backward, before ``tape.zero()``."""
    assert _errors(_GENERATOR.replace("ZERO", "tape.zero()")) == []


def test_generator_loop_without_zero_still_found() -> None:
    text = _GENERATOR.replace("ZERO", "pass")
    assert ("WF301", _line(text, "tape.backward(loss)")) in _errors(text)


_TILES = """
import warp as wp

@wp.kernel
def dense(x: wp.array2d(dtype=float), w: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    xi = wp.tile_load(x[i], shape=4)
    wt = wp.tile_load(w, shape=4)
    wp.tile_store(z, wp.tile_sum(wp.tile_map(wp.mul, xi, wt)), offset=i)

@wp.kernel
def mse(z: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, z[i] * z[i])

x = wp.ones((8, 4), dtype=float)
w = wp.ones(4, dtype=float, requires_grad=True)
z = wp.zeros(8, dtype=float GRAD)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch_tiled(dense, dim=8, inputs=[x, w], outputs=[z], block_dim=16)
    wp.launch(mse, dim=8, inputs=[z], outputs=[loss])
tape.backward(loss)
"""


def test_tile_store_writes_its_array() -> None:
    """``wp.tile_store(z, ...)`` writes ``z`` from ``w``: without ``requires_grad`` the chain to ``w`` is cut."""
    text = _TILES.replace(" GRAD", "")
    assert ("WF201", _line(text, "z = wp.zeros")) in _errors(text)
    assert _errors(_TILES.replace(" GRAD", ", requires_grad=True")) == []


_RECORDED_STEP = """
import numpy as np
import warp as wp

@wp.kernel
def cost(u: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, u[i] * u[i])

thrust = wp.array(np.ones(4, dtype=np.float32), requires_grad=True)
centered = wp.zeros(4, requires_grad=True)
loss = wp.zeros(1, requires_grad=True)
for it in range(3):
    tape = wp.Tape()
    loss.zero_()
    with tape:
        u = thrust.numpy()
        centered.assign(u - u.mean())

        def back():
            g = centered.grad.numpy()
            thrust.grad.assign(thrust.grad.numpy() + g - g.mean())

        tape.record_func(back, arrays=[thrust, centered])
        wp.launch(cost, dim=4, inputs=[centered], outputs=[loss])
    STEP
    tape.zero()
"""


def test_record_func_hands_gradients_to_its_arrays() -> None:
    """``tape.record_func(back, arrays=[thrust, ...])``: the backward produces ``thrust.grad``, so a host update
    recorded before it reads a stale gradient (WF302); after the backward it is the training step."""
    buggy = _RECORDED_STEP.replace("    STEP", "    with tape:\n        thrust.assign(thrust.numpy() - 0.1 * thrust.grad.numpy())\n    tape.backward(loss)")
    assert ("WF302", _line(buggy, "thrust.assign(thrust.numpy()")) in _errors(buggy)
    ok = _RECORDED_STEP.replace("    STEP", "    tape.backward(loss)\n    thrust.assign(thrust.numpy() - 0.1 * thrust.grad.numpy())")
    assert _errors(ok) == []


def test_a_step_before_the_backward_names_the_clip_after_it() -> None:
    """``for p, g in zip(params, grads): p.grad.assign(...)`` writes ``w.grad`` (zip of known lists), so the
    WF304 finding of the step before the backward names the clip's line for the move."""
    text = _GENERATOR.replace("def main():", '''def clip(params):
    grads = [p.grad.numpy() for p in params]
    for p, g in zip(params, grads):
        p.grad.assign(g * 0.5)

def main():''').replace("""    for it, value in optimize(x, y, loss, 5):
        print(it, value)
        opt.step([x.grad])""", """    for it in range(3):
        loss.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(square, dim=4, inputs=[x], outputs=[y])
            wp.launch(total, dim=4, inputs=[y], outputs=[loss])
        opt.step([x.grad])
        tape.backward(loss)
        clip([x])
        tape.zero()""")
    src, _ = parse_file("prog.py", text)
    found = [f for f in run_rules(build_project({"prog.py": src})) if f.rule == "WF304"]
    assert found and found[0].data.get("grad_write_lines") == [_line(text, "clip([x])")]


def test_a_yield_before_the_backward_is_found_at_the_yield() -> None:
    """The generator yields before its backward: the caller's step reads the old gradient. The finding is at
    the ``yield`` (the fix moves the backward before it), not at the caller's read."""
    text = _GENERATOR.replace("ZERO", "tape.zero()").replace(
        "        tape.backward(loss)\n        yield it, float(loss.numpy()[0])\n",
        "        yield it, float(loss.numpy()[0])\n        tape.backward(loss)\n")
    found = {(rule, line) for rule, line in _errors(text)}
    assert ("WF304", _line(text, "yield it")) in found
    assert all(line == _line(text, "yield it") for rule, line in found if rule in ("WF303", "WF304"))


_WRITE_BACK = """
import warp as wp

@wp.kernel
def square(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])

@wp.kernel
def descend(x: wp.array(dtype=float), g: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] - 0.1 * g[i]

x = wp.ones(4, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
for it in range(3):
    CLEAR
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=4, inputs=[x], outputs=[loss])
    tape.backward(loss)
    g = x.grad.numpy()
    tape.zero()
    x.grad.assign(g)
    wp.launch(descend, dim=4, inputs=[x, x.grad])
"""


def test_a_gradient_written_back_after_the_clear_holds_values() -> None:
    """``g = x.grad.numpy(); tape.zero(); x.grad.assign(g)``: the step reads the written-back gradient, not zeros
    (no WF304); the next iteration's backward adds onto it unless cleared (WF301)."""
    text = _WRITE_BACK.replace("    CLEAR\n", "")
    found = _errors(text)
    assert ("WF301", _line(text, "tape.backward(loss)")) in found
    assert not any(rule == "WF304" for rule, _ in found)
    assert _errors(_WRITE_BACK.replace("CLEAR", "x.grad.zero_()")) == []
