"""WF301 in real shapes: gradient reads through ``tape.gradients``, and the codemod's placement strategies
(after the last consumer, inside the consuming ``if`` arm, at the caller of a function returning the
gradient), on small sources and on planted bugs in Warp's own examples (nobody on the team wrote them)."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodTest

from codemods.wf301_tape_zero import ZeroTape
from tests.test_rules_real_mutants import _check, _errors, _line, _mutate, _package_file
from warpfix.apply import Selection, plan_fixes
from warpfix.model.grad_reads import cst_grad_locals, cst_grad_owner, cst_reads_grad, grad_owner, reads_grad
from warpfix.model.library import LibraryIndex
from warpfix.rules._tape_scope_examples import KERNELS


@pytest.mark.parametrize("expr, owner", [
    ("x.grad", "x"),
    ("tape.gradients[self.mesh.rot]", "self.mesh.rot"),
    ("self.tape.gradients.get(w, None)", "w"),
    ("tape.gradients", None),
    ("tape.gradients[a:b]", None),
    ("d.get(x)", None),
])  # fmt: skip
def test_grad_owner_in_both_trees(expr: str, owner: str | None) -> None:
    node = ast.parse(expr, mode="eval").body
    found = grad_owner(node)
    assert (ast.unparse(found) if found is not None else None) == owner
    cnode = cst.parse_expression(expr)
    cfound = cst_grad_owner(cnode)
    assert (cst.Module([]).code_for_node(cfound) if cfound is not None else None) == owner


def test_reads_through_locals() -> None:
    body = cst.parse_module("g = tape.gradients[x]\nh = g.flatten()\nopt.step([h])\nprint(y)\n").body
    names = cst_grad_locals(body)
    assert names == {"g", "h"}
    assert [cst_reads_grad(s, names) for s in body] == [True, True, True, False]
    assert reads_grad(ast.parse("assert np.allclose(t.gradients.get(w), 0)")) is True
    assert reads_grad(ast.parse("assert np.allclose(w.numpy(), 0)")) is False


@pytest.fixture
def index(tmp_path: Path) -> LibraryIndex:
    return LibraryIndex(cache_dir=str(tmp_path / "summaries"))


STRUCT_TAPE = KERNELS + """
class Sim:
    def __init__(self):
        self.tape = None

    def step(self):
        loss.zero_()
        self.tape = wp.Tape()
        with self.tape:
            wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
            wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])
        self.tape.backward(loss)
        g = self.tape.gradients[w]
        wp.launch(sgd, dim=2, inputs=[w, g, 0.1])
        self.tape.zero()


sim = Sim()
for it in range(20):
    sim.step()
"""


def test_a_gradient_read_through_tape_gradients_is_consumed(index: LibraryIndex) -> None:
    """``tape.gradients[w]`` is ``w.grad``: without the zero its next backward sums (a fresh tape per step)."""
    assert not _errors(_check(STRUCT_TAPE, index))
    buggy = _mutate(STRUCT_TAPE, "        self.tape.zero()\n", "")
    assert _errors(_check(buggy, index)) == [("WF301", _line(buggy, "self.tape.backward(loss)"))]


def test_diffray_without_its_zero(index: LibraryIndex) -> None:
    """example_diffray reads the gradient of ``self.render_mesh.rot`` (an array a struct holds) through
    ``self.tape.gradients[...]``, on a tape made anew each step."""
    name = "example_diffray.py"
    text = _package_file("warp", f"examples/optim/{name}")
    assert not [e for e in _errors(_check(text, index, name)) if e[0] == "WF301"]
    buggy = _mutate(text, "            self.tape.zero()\n", "")
    assert [e for e in _errors(_check(buggy, index, name)) if e[0] == "WF301"] == [
        ("WF301", _line(buggy, "self.tape.backward(self.loss)\n\n"))]


class TestStrategies(CodemodTest):
    TRANSFORM = ZeroTape

    def test_after_the_last_consumer_through_a_local(self) -> None:
        before = """
            class Sim:
                def step(self):
                    with wp.ScopedTimer("step"):
                        if graph:
                            wp.capture_launch(graph)
                        else:
                            self.tape = wp.Tape()
                            with self.tape:
                                self.forward()
                            self.tape.backward(self.loss)
                        rot_grad = self.tape.gradients[self.rot]
                        self.optimizer.step([rot_grad])
                        wp.launch(normalize, dim=1, inputs=[self.rot])
        """
        after = before.replace("self.optimizer.step([rot_grad])\n",
                               "self.optimizer.step([rot_grad])\n                        self.tape.zero()\n")
        self.assertCodemod(before, after, line=10)

    def test_local_tape_after_the_consumer(self) -> None:
        """darcy_ls: a fresh local tape per call; the zero goes right after the gradient's consumer."""
        before = """
            def step(self):
                tape = wp.Tape()
                with tape:
                    forward()
                tape.backward(loss=loss)
                v.assign(v.grad)
                self.advect(v)
                return float(loss.numpy()[0])
        """
        after = before.replace("v.assign(v.grad)\n", "v.assign(v.grad)\n                tape.zero()\n")
        self.assertCodemod(before, after, line=5, arrays="fem.make_x(...)")

    def test_inside_the_consuming_arm(self) -> None:
        """Checkpoint segments: the last segment's gradient is the caller's; the zero goes in the arm that
        hands the gradient on, never at the end of the loop."""
        before = """
            def backward(self):
                for segment in range(n - 1, -1, -1):
                    with wp.Tape() as self.tape:
                        self.run(segment)
                    self.tape.backward()
                    if segment > 0:
                        wp.copy(self.saved, self.x[0].grad)
                    print(segment)
        """
        after = before.replace("wp.copy(self.saved, self.x[0].grad)\n",
                               "wp.copy(self.saved, self.x[0].grad)\n                        self.tape.zero()\n")
        self.assertCodemod(before, after, line=5)

    def test_two_readers_zero_at_the_end_of_the_loop(self) -> None:
        """A logging arm after the optimizer step is no consuming arm: the zero goes after both."""
        before = """
            for it in range(iters):
                tape.backward(loss)
                step(w, w.grad)
                if it % 10 == 0:
                    print(w.grad.numpy())
        """
        after = before.rstrip() + "\n    tape.zero()\n"
        self.assertCodemod(before, after.replace("\n    tape.zero()", "\n                tape.zero()"), line=2)

    def test_at_the_caller_of_a_function_returning_the_gradient(self) -> None:
        before = """
            def gradient(w):
                tape = wp.Tape()
                with tape:
                    forward(w)
                tape.backward(loss)
                return tape.gradients[w]

            for it in range(iters):
                g = gradient(w)
                wp.launch(sgd, dim=n, inputs=[w, g])
                print(it)
        """
        after = before.replace("inputs=[w, g])\n", "inputs=[w, g])\n                g.zero_()\n")
        self.assertCodemod(before, after, line=5)

    def test_a_returned_gradient_not_bound_to_a_name_is_left(self) -> None:
        before = """
            def gradient(w):
                tape = wp.Tape()
                with tape:
                    forward(w)
                tape.backward(loss)
                return w.grad

            for it in range(iters):
                wp.launch(sgd, dim=n, inputs=[w, gradient(w)])
        """
        self.assertCodemod(before, before, line=5, expected_skip=True)


@pytest.mark.parametrize("folder, name, zero, after", [
    ("fem", "example_darcy_ls_optimization.py", "        # Zero-out gradients used in tape\n        tape.zero()\n",
     "        v.assign(v.grad)\n"),
    ("optim", "example_diffray.py", "            self.tape.zero()\n", "            self.optimizer.step([rot_grad])\n"),
    ("optim", "example_fluid_checkpoint.py", "\n                self.tape.zero()\n\n        # Done",
     "                wp.copy(self.pressure_array_grad_saved, self.pressure_arrays[0].grad)\n"),
])  # fmt: skip
def test_planted_missing_zero_is_fixed_where_the_gradient_is_consumed(
    folder: str, name: str, zero: str, after: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """darcy_ls (its finding names fem expressions no zero-before-backward can name), diffray (the gradient
    read through ``tape.gradients``) and fluid_checkpoint (inside the consuming arm of each segment): the
    zero goes right after the consumer of the gradient."""
    stmt = next(line.strip() for line in zero.splitlines() if line.strip().endswith(".zero()"))
    buggy = _mutate(_package_file("warp", f"examples/{folder}/{name}"), zero, zero[zero.index(".zero()\n") + 8:])
    (tmp_path / name).write_text(buggy, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = plan_fixes(["."], selection=Selection(select=["WF301"], use_cache=False))
    assert [(e.finding.rule, e.kept) for e in result.edits] == [("WF301", True)], [e.reason for e in result.edits]
    fixed = next(iter(result.changed.values()))
    indent = after[: len(after) - len(after.lstrip())]
    assert after + indent + stmt + "\n" in fixed
    assert fixed.count(stmt) == buggy.count(stmt) + 1


def test_two_losses_differentiated_on_one_tape_are_zeroed_between_the_backwards(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Warp's cantilever topology optimization (the mutation bench's drop-zero mutant): the compliance and
    the volume are differentiated on one tape in turn, the first gradient copied out in between. Without the
    ``tape.zero()`` between them, the second backward (it replays the same recording) adds the volume
    gradient onto the compliance gradient still in ``raw.grad``. Found at the second backward; the zero goes
    back after the first gradient's read, the unmutated program again."""
    name = "example_cantilever_topology_optimization.py"
    original = _package_file("warp", f"examples/fem/{name}")
    read = "        objective_gradient = self.raw.grad.numpy().astype(np.float64)\n"
    buggy = _mutate(original, read + "        tape.zero()\n", read)
    second = _line(buggy, "tape.backward(volume_loss_value)")
    assert [f for f in _errors(_check(original, LibraryIndex())) if f[0] == "WF301"] == []
    (tmp_path / name).write_text(buggy, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = plan_fixes(["."], selection=Selection(select=["WF301"], use_cache=False))
    assert [(e.finding.line, e.kept) for e in result.edits] == [(second, True)], [e.reason for e in result.edits]
    assert "zero between the backwards" in result.edits[0].reason
    assert next(iter(result.changed.values())) == original


def test_a_returned_gradient_is_zeroed_at_its_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``return tape.gradients[w]`` consumed by the caller's update: found at the backward, fixed by
    ``g.zero_()`` after the caller's last use of ``g``; the fixed program has no finding (apply twice is a
    no-op)."""
    text = (Path(__file__).parent / "verify_programs" / "returned_grad.py").read_text(encoding="utf-8")
    (tmp_path / "main.py").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = plan_fixes(["."], selection=Selection(select=["WF301"], use_cache=False))
    assert [(e.finding.rule, e.finding.line, e.kept) for e in result.edits] == [
        ("WF301", _line(text, "tape.backward(loss)"), True)]
    assert "zero at the caller" in result.edits[0].reason
    fixed = next(iter(result.changed.values()))
    assert fixed == _mutate(text, "inputs=[w, g, 0.01])\n", "inputs=[w, g, 0.01])\n    g.zero_()\n")
    (tmp_path / "main.py").write_text(fixed, encoding="utf-8")
    assert plan_fixes(["."], selection=Selection(select=["WF301"], use_cache=False)).edits == []


class TestMethodCaller(CodemodTest):
    TRANSFORM = ZeroTape

    def test_the_segments_zero_where_they_hand_on_and_the_caller_consumes_the_rest(self) -> None:
        """fluid_checkpoint_cb with the main loop's ``example.tape.zero()`` dropped (a WF903 of the probe at the
        segment backward): the segments' own zero stays, the caller zeroes after its optimizer step."""
        before = """
            class Example:
                def backward(self):
                    for segment in range(n - 1, -1, -1):
                        with wp.Tape() as self.tape:
                            self.run(segment)
                        self.tape.backward()
                        if segment > 0:
                            wp.copy(self.saved, self.x[0].grad)
                            self.tape.zero()

            example = Example()
            for it in range(iters):
                example.backward()
                example.optimizer.step([example.x[0].grad.flatten()])
                if example.zero_graph:
                    wp.capture_launch(example.zero_graph)
        """
        after = before.replace("example.optimizer.step([example.x[0].grad.flatten()])\n",
                               "example.optimizer.step([example.x[0].grad.flatten()])\n    example.tape.zero()\n")
        self.assertCodemod(before, after.replace("\n    example.tape.zero()", "\n                example.tape.zero()"),
                           line=6)
        zeroed = before.replace("wp.capture_launch(example.zero_graph)\n",
                                "wp.capture_launch(example.zero_graph)\n                else:\n"
                                "                    example.tape.zero()\n")
        self.assertCodemod(zeroed, zeroed, line=6, expected_skip=True)


SIBLING_CONSUMER = KERNELS + """

class Trainer:
    def __init__(self):
        self.tape = None

    def forward(self):
        loss.zero_()
        self.tape = wp.Tape()
        with self.tape:
            wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
            wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])

    def backward(self):
        self.tape.backward(loss)

    def step(self):
        wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])


trainer = Trainer()
{before}for it in range(4):
    trainer.forward()
    trainer.backward()
    if it == 0:
        print("grad", w.grad.numpy())
    trainer.step()
"""


def test_the_zero_goes_into_the_method_the_training_loop_consumes_gradients_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blind corpus's spring_chain: ``forward()``, ``backward()``, ``step()`` called in turn from
    ``__main__`` and ``tape.zero()`` dropped from ``step()``: the zero goes back after the optimizer step in
    ``step()``, not into the loop's ``if it == 0`` print (the first reader after the backward)."""
    text = SIBLING_CONSUMER.replace("{before}", "")
    (tmp_path / "main.py").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = plan_fixes(["."], selection=Selection(select=["WF301"], use_cache=False))
    assert [(e.finding.line, e.kept) for e in result.edits] == [(_line(text, "self.tape.backward(loss)"), True)]
    assert "zero in the consuming method" in result.edits[0].reason
    assert next(iter(result.changed.values())) == _mutate(
        text, "inputs=[w, w.grad, 0.1])\n", "inputs=[w, w.grad, 0.1])\n        self.tape.zero()\n")


RUNNER = SIBLING_CONSUMER.split("\n\ntrainer = Trainer()")[0] + """


def train(trainer, n_iters, callback):
    for it in range(n_iters):
        trainer.forward()
        trainer.backward()
        callback(it, trainer)
        trainer.step()


def report(it, trainer):
    if it == 0:
        print("grad", w.grad.numpy())


train(Trainer(), 4, report)
"""


def test_a_trainer_handed_to_a_runner_function_gets_its_zero_in_the_consuming_method(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blind corpus 3's rope_throw: the training loop is a generic ``train(trainer, n, callback)`` handed
    ``Trainer()``; its parameter is the instance, so ``step()`` is the loop's last consumer as above."""
    (tmp_path / "main.py").write_text(RUNNER, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = plan_fixes(["."], selection=Selection(select=["WF301"], use_cache=False))
    assert [(e.finding.line, e.kept) for e in result.edits] == [(_line(RUNNER, "self.tape.backward(loss)"), True)]
    assert "zero in the consuming method" in result.edits[0].reason
    assert next(iter(result.changed.values())) == _mutate(
        RUNNER, "inputs=[w, w.grad, 0.1])\n", "inputs=[w, w.grad, 0.1])\n        self.tape.zero()\n")


@pytest.mark.parametrize("before", ["trainer.step()\n", "def warm(example):\n    example.step()\n\n\nwarm(trainer)\n"],
                         ids=["direct", "through-a-helper"])
def test_no_zero_goes_into_a_consuming_method_that_also_runs_before_any_backward(
    before: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``step()`` also called before the loop (directly, or by a helper handed the trainer): ``self.tape`` is
    still None there, so a zero in ``step()`` would crash the program; the next strategy zeroes ``w.grad``
    before the backward instead."""
    text = SIBLING_CONSUMER.replace("{before}", before)
    (tmp_path / "main.py").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = plan_fixes(["."], selection=Selection(select=["WF301"], use_cache=False))
    assert [e.reason for e in result.edits] == ["applied; zero before backward: w.grad cleared before it"]
    assert next(iter(result.changed.values())) == _mutate(
        text, "        self.tape.backward(loss)\n", "        w.grad.zero_()\n        self.tape.backward(loss)\n")


RERECORDED_IN_FORWARD = KERNELS + """

class Smoother:
    def __init__(self):
        self.tape = wp.Tape()

    def forward(self):
        loss.zero_()
        with self.tape:
            wp.launch(predict, dim=32, inputs=[x, w], outputs=[y])
            wp.launch(mse, dim=32, inputs=[y, target], outputs=[loss])

    def backward(self):
        self.tape.backward(loss)

    def update(self):
        wp.launch(sgd, dim=2, inputs=[w, w.grad, 0.1])


def run(example, iters):
    for it in range(iters):
        example.forward()
        example.backward()
        example.update()


run(Smoother(), 4)
"""


def test_a_tape_re_recorded_by_another_method_is_reset_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The blind corpus's curve_smooth: ``self.tape`` made once, recorded by ``forward()``, backwarded by
    ``backward()``, never reset: the reset goes before ``forward()``'s ``with self.tape:``."""
    (tmp_path / "main.py").write_text(RERECORDED_IN_FORWARD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = plan_fixes(["."], selection=Selection(select=["WF301"], use_cache=False))
    assert [(e.finding.line, e.kept) for e in result.edits] == [
        (_line(RERECORDED_IN_FORWARD, "self.tape.backward(loss)"), True)]
    assert result.edits[0].reason == "applied; re-recorded tape: `self.tape.reset()` before forward() records it"
    assert next(iter(result.changed.values())) == _mutate(
        RERECORDED_IN_FORWARD, "        loss.zero_()\n        with self.tape:", "        loss.zero_()\n        self.tape.reset()\n        with self.tape:")
