"""WF106 precision: a read-modify-write of an integer array reports only when the values it
loads can reach a gradient, and a kernel compiled without an adjoint is never replayed.

Before, newton's ``compute_shape_aabbs`` (``newton/_src/sim/collide.py``: thread 0 bumps an
int32 generation counter, ``g = contact_generation[0]; ...; contact_generation[0] = g``) was a
WF106 error in a whole-newton check."""

from __future__ import annotations

import ast
import importlib.util
import textwrap
from pathlib import Path

import pytest

from warpfix.engine import check_sources

PROGRAM = '''\
import warp as wp


@wp.kernel{options}
def bump(gen: {ann}, x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    g = gen[0]
    if g == 2147483647:
        g = 0
    else:
        g = g + 1
    gen[0] = g
{use}


@wp.kernel
def loss_k(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


gen = wp.zeros(1, dtype=wp.int32)
x = wp.ones(4, dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
with wp.Tape() as tape:
    wp.launch(bump, dim=4, inputs=[gen, x], outputs=[y])
    wp.launch(loss_k, dim=4, inputs=[y], outputs=[loss])
tape.backward(loss)
'''
STORE_LINE = 12
PLAIN_USE = "    y[i] = wp.sin(x[i])"


def _wf106(source: str) -> list[int]:
    result = check_sources({"prog.py": source})
    assert not result.errors, result.errors
    return [f.line for f in result.findings if f.rule == "WF106"]


@pytest.mark.parametrize("ann", ["wp.array(dtype=wp.int32)", "wp.array[wp.int32]", "wp.array1d[int]"])
def test_an_integer_counter_whose_values_reach_no_gradient_is_not_reported(ann: str) -> None:
    assert _wf106(PROGRAM.format(options="", ann=ann, use=PLAIN_USE)) == []


@pytest.mark.parametrize(
    "use",
    [
        "    y[g % 4] = wp.sin(x[i])",  # an index of a differentiable store
        "    y[i] = wp.sin(x[g % 4])",  # an index of a differentiable read
        "    if g > 2:\n        y[i] = x[i] * x[i]",  # a branch steering a float store
        "    y[i] = float(g) * wp.sin(x[i])",  # arithmetic stored to a float array
        "    for k in range(g):\n        y[i] = y[i] + x[i] * x[i]",  # a loop bound over float work
        "    wp.atomic_add(y, g % 4, x[i] * x[i])",  # an atomic's index
    ],
)
def test_an_integer_read_modify_write_whose_values_reach_a_gradient_is_reported(use: str) -> None:
    assert STORE_LINE in _wf106(PROGRAM.format(options="", ann="wp.array(dtype=wp.int32)", use=use))


def test_a_float_read_modify_write_is_still_reported() -> None:
    source = PROGRAM.format(options="", ann="wp.array(dtype=float)", use=PLAIN_USE)
    source = source.replace("gen = wp.zeros(1, dtype=wp.int32)", "gen = wp.zeros(1, dtype=float, requires_grad=True)")
    assert _wf106(source) == [STORE_LINE]


def test_a_kernel_without_adjoint_is_not_replayed() -> None:
    use = "    y[i] = float(g) * wp.sin(x[i])"  # reaches a gradient, were the kernel replayed
    source = PROGRAM.format(options="(enable_backward=False)", ann="wp.array(dtype=wp.int32)", use=use)
    result = check_sources({"prog.py": source})
    rules = sorted(f.rule for f in result.findings)
    assert "WF106" not in rules and "WF202" in rules  # the lost gradient is WF202's


def test_a_kernel_without_adjoint_that_overwrites_what_an_earlier_op_read_is_reported() -> None:
    source = textwrap.dedent(
        """\
        import warp as wp


        @wp.kernel
        def square(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
            i = wp.tid()
            wp.atomic_add(loss, 0, q[i] * q[i])


        @wp.kernel(enable_backward=False)
        def clamp(q: wp.array(dtype=float)):
            i = wp.tid()
            if q[i] > 1.0:
                q[i] = 1.0


        q = wp.full(4, 2.0, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with wp.Tape() as tape:
            wp.launch(square, dim=4, inputs=[q], outputs=[loss])
            wp.launch(clamp, dim=4, inputs=[q])
        tape.backward(loss)
        """
    )
    assert _wf106(source) == [14]


def _newton_kernel(name: str) -> str:
    spec = importlib.util.find_spec("newton")
    if spec is None or spec.origin is None:
        pytest.skip("newton is not installed")
    path = Path(spec.origin).parent / "_src" / "sim" / "collide.py"
    text = path.read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            return "\n".join(text.splitlines()[start - 1 : node.end_lineno])
    pytest.skip(f"newton has no {name} any more")


@pytest.mark.parametrize("options", ["as shipped", "with its adjoint compiled"])
def test_newtons_generation_counter_is_not_reported(options: str) -> None:
    kernel = _newton_kernel("compute_shape_aabbs")
    if options != "as shipped":
        assert "@wp.kernel(enable_backward=False)" in kernel
        kernel = kernel.replace("@wp.kernel(enable_backward=False)", "@wp.kernel")
    fn = ast.parse(kernel).body[0]
    assert isinstance(fn, ast.FunctionDef)
    names = [a.arg for a in fn.args.args]
    source = (
        "import warp as wp\n\n_EMPTY_AABB_EXTENT = wp.constant(1.0e30)\n\n\n"
        + kernel
        + "\n\n\n"
        + "\n".join(f"{n} = wp.zeros(4, dtype=float, requires_grad=True)" for n in names)
        + "\nwith wp.Tape() as tape:\n"
        + f"    wp.launch(compute_shape_aabbs, dim=4, inputs=[{', '.join(names)}])\n"
        + "tape.backward(aabb_lower)\n"
    )
    assert "contact_generation[0] = g" in source
    assert _wf106(source) == []
