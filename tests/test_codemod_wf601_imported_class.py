"""WF601 hoist of a loss the windows share, the windows' code being methods of a class defined in another
project file (blind corpus 2's swarm_route: ``from flock import Flock``, ``flock = Flock()``, the window loop
calling ``flock.run_segment(..., loss)``). The method a call runs is found from the class the receiver is
bound to, resolved by imports: not from a same-named method of some other class."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.codemod import CodemodContext, SkipFile

from codemods.wf601_hoist import HoistWindowTape

SIM = '''import warp as wp


@wp.kernel
def step(q: wp.array(dtype=float), gain: wp.array(dtype=float), q_out: wp.array(dtype=float)):
    i = wp.tid()
    q_out[i] = q[i] + gain[0] * q[i]


@wp.kernel
def cost(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


class Chain:
    def __init__(self, steps):
        self.steps = steps
        self.q = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(steps + 1)]

    def advance(self, t, gain, loss):
        wp.launch(step, 4, inputs=[self.q[t], gain], outputs=[self.q[t + 1]])
        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[loss])
'''

MAIN = '''import warp as wp

from sim import Chain


def train(gain, loss):
    chain = Chain(8)
    loss.zero_()
    for t in range(chain.steps):
        tape = wp.Tape()
        with tape:
            chain.advance(t, gain, loss)
        tape.backward(loss)
    return gain.grad
'''

HOISTED = '''    tape = wp.Tape()
    with tape:
        for t in range(chain.steps):
            chain.advance(t, gain, loss)
    tape.backward(loss)
'''


def rewrite(main: str, sim: str = SIM, files: tuple[str, ...] = ("main.py", "sim.py")) -> str:
    line = main[: main.index("tape.backward(")].count("\n") + 1
    sources = {name: text for name, text in zip(("main.py", "sim.py"), (main, sim), strict=True) if name in files}
    context = CodemodContext(filename="main.py", scratch={"sources": sources})
    return HoistWindowTape(context, line=line).transform_module(cst.parse_module(main)).code


def refusal(main: str, sim: str = SIM, files: tuple[str, ...] = ("main.py", "sim.py")) -> str:
    with pytest.raises(SkipFile) as caught:
        rewrite(main, sim, files)
    return str(caught.value)


@pytest.mark.parametrize("main", [
    MAIN,
    MAIN.replace("from sim import Chain", "import sim").replace("Chain(8)", "sim.Chain(8)"),
    MAIN.replace("from sim import Chain", "from sim import Chain as Rollout").replace("Chain(8)", "Rollout(8)"),
])
def test_the_method_of_a_class_constructed_from_another_file_is_followed(main: str) -> None:
    assert HOISTED in rewrite(main)


def test_a_parameter_annotated_with_the_imported_class() -> None:
    main = MAIN.replace("def train(gain, loss):\n    chain = Chain(8)\n", "def train(chain: Chain, gain, loss):\n")
    assert HOISTED in rewrite(main)


def test_an_attribute_bound_to_the_imported_class_in_init() -> None:
    main = '''import warp as wp

from sim import Chain


class Trainer:
    def __init__(self):
        self.chain = Chain(8)

    def train(self, gain, loss):
        loss.zero_()
        for t in range(8):
            tape = wp.Tape()
            with tape:
                self.chain.advance(t, gain, loss)
            tape.backward(loss)
'''
    assert "            for t in range(8):\n                self.chain.advance(t, gain, loss)\n" \
        "        tape.backward(loss)\n" in rewrite(main)


def test_a_method_inherited_from_a_base_class_of_a_third_file_through_imports() -> None:
    sim = "from base import Chain as Base\n\n\nclass Chain(Base):\n    pass\n"
    line = MAIN.index("tape.backward(")
    sources = {"main.py": MAIN, "sim.py": sim, "base.py": SIM}
    context = CodemodContext(filename="main.py", scratch={"sources": sources})
    after = HoistWindowTape(context, line=MAIN[:line].count("\n") + 1).transform_module(cst.parse_module(MAIN)).code
    assert HOISTED in after


def test_the_imported_class_is_followed_not_a_same_named_method_of_a_local_class() -> None:
    """The imported class's ``advance`` overwrites the loss: refused, though a local class has an
    ``advance`` that only adds (the object is not one of the local class)."""
    sim = SIM.replace("wp.atomic_add(loss, 0, q[i] * q[i])", "loss[0] = q[i] * q[i]")
    local = '''

class Local:
    def advance(self, t, gain, loss):
        wp.launch(cost, 4, inputs=[gain], outputs=[loss])
'''
    main = MAIN.replace("from sim import Chain\n", "from sim import Chain, cost\n" + local)
    why = refusal(main, sim)
    assert "kernel cost (line 11), launched at line 23 (Chain.advance()), stores into it with `=`" in why, why


def test_a_class_whose_file_is_not_in_the_project_is_refused() -> None:
    why = refusal(MAIN, files=("main.py",))
    assert "it is handed to chain.advance() at line 12 (the window loop), whose code is not in the project" in why
