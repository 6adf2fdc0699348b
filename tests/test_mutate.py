"""bench/mutate.py: each mutation operator plants its bug at the intended place and the mutant parses;
the judge compares recorded losses and gradients.

Fast, except the one slow test that runs a tiny Warp program under the gradient recorder.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import mutate as bench  # noqa: E402
from bench.mutants import operators as ops  # noqa: E402
from bench.mutants.operators import BY_NAME, Mutant, TapedScope  # noqa: E402

PROGRAM = textwrap.dedent(
    '''\
    import warp as wp


    @wp.func
    def dist(d: wp.vec3):
        return wp.length(d)


    @wp.kernel
    def scale(x: wp.array(dtype=float), k: float, y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * k


    @wp.kernel
    def loss_kernel(p: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
        loss[0] = dist(p[0])


    @wp.kernel
    def untaped(x: wp.array(dtype=float), g: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = x[i] - g[i] * 0.1


    class Sim:
        def __init__(self, n):
            self.states = [make_state() for _ in range(n + 1)]
            self.x = wp.zeros(4, dtype=float, requires_grad=True)
            self.y = wp.zeros(4, dtype=float, requires_grad=True)
            self.loss = wp.zeros(1, dtype=float, requires_grad=True)
            self.tape = wp.Tape()

        def simulate(self, n):
            for t in range(n):
                self.solver.step(self.states[t], self.states[t + 1], self.dt)
            wp.launch(scale, dim=4, inputs=[self.x, 2.0], outputs=[self.y])
            wp.launch(loss_kernel, dim=1, inputs=[self.states[-1].q, self.loss])

        def train(self, n):
            for _ in range(3):
                with self.tape:
                    self.simulate(n)
                self.tape.backward(self.loss)
                wp.launch(untaped, dim=4, inputs=[self.x, self.x.grad])
                self.tape.zero()
    '''
)

FUNC_GRAD = textwrap.dedent(
    '''\
    import warp as wp


    @wp.func
    def f(x: float):
        return x * x


    @wp.func_grad(f)
    def adj_f(x: float, adj_ret: float):
        wp.adjoint[x] += 2.0 * x * adj_ret
    '''
)


LAUNCH = "        wp.launch(scale, dim=4, inputs=[self.x, 2.0], outputs=[self.y])\n"
REBIND = PROGRAM.replace(LAUNCH, LAUNCH + "        self.x = self.y\n")


METHODS = textwrap.dedent(
    '''\
    import warp as wp


    class Example:
        def forward_backward(self):
            self.tape = wp.Tape()
            with self.tape:
                self.forward()
            self.tape.backward(self.loss)

        def step(self):
            if self.graph:
                wp.capture_launch(self.graph)
            else:
                self.forward_backward()
            x = self.states[0].qd
            wp.launch(step_kernel, dim=len(x), inputs=[x, x.grad, self.rate])
            self.tape.zero()
    '''
)


def mutant(name: str, site: int = 0, source: str = PROGRAM) -> Mutant:
    result = BY_NAME[name].mutate(source, site)
    assert result is not None
    ast.parse(result.code)  # still valid Python
    return result


def line(m: Mutant) -> str:
    return m.code.splitlines()[m.line - 1].strip()


def test_taped_scope_follows_methods_and_kernels() -> None:
    import libcst as cst

    scope = TapedScope(cst.parse_module(PROGRAM))
    assert scope.taped_functions == {"simulate"}
    assert scope.taped_kernels == {"scale", "loss_kernel", "dist"}


def test_alias_step_feeds_the_input_state_as_output() -> None:
    m = mutant("alias-step")
    assert line(m) == "self.solver.step(self.states[t], self.states[t], self.dt)"
    assert BY_NAME["alias-step"].count(PROGRAM) == 1


def test_list_alias_builds_one_shared_buffer() -> None:
    m = mutant("list-alias")
    assert line(m) == "self.states = [make_state()] * (n + 1)"


def test_drop_zero_removes_the_tape_zero_and_anchors_at_the_backward() -> None:
    m = mutant("drop-zero")
    assert "self.tape.zero()" not in m.code
    backward = next(n for n, t in enumerate(m.code.splitlines(), 1) if "backward(" in t)
    assert backward in m.anchors
    assert BY_NAME["drop-zero"].count(PROGRAM) == 1


def test_inplace_mul_splits_a_product_into_an_inplace_multiply() -> None:
    m = mutant("inplace-mul")
    lines = m.code.splitlines()
    assert line(m) == "y[i] *= k"
    assert lines[m.line - 2].strip() == "y[i] = x[i]"
    # the update kernel launched outside the tape is not a site
    assert BY_NAME["inplace-mul"].count(PROGRAM) == 1


def test_inplace_mul_operand_makes_the_left_operand_the_inplace_multiplier() -> None:
    m = mutant("inplace-mul-operand")
    assert line(m) == "y[i] *= x[i]"
    assert m.code.splitlines()[m.line - 2].strip() == "y[i] = k"
    assert BY_NAME["inplace-mul-operand"].count(PROGRAM) == 1
    # a literal left operand is no site: its gradient is never read
    assert BY_NAME["inplace-mul-operand"].count(PROGRAM.replace("x[i] * k", "2.0 * x[i]")) == 0


def test_ping_pong_makes_the_trajectory_alternate_between_two_buffers() -> None:
    m = mutant("ping-pong")
    assert line(m) == "self.states = [self.states[0]] + [self.states[1 + i % 2] for i in range(len(self.states) - 1)]"
    assert m.code.splitlines()[m.line - 2].strip() == "self.states = [make_state() for _ in range(n + 1)]"
    assert BY_NAME["ping-pong"].count(PROGRAM) == 1
    step = next(n for n, t in enumerate(m.code.splitlines(), 1) if ".step(" in t)
    assert step in m.anchors and m.line not in m.anchors


def test_kernel_rmw_writes_the_result_back_into_the_input_element() -> None:
    m = mutant("kernel-rmw")
    assert line(m) == "x[i] = y[i]"
    assert m.code.splitlines()[m.line - 2].strip() == "y[i] = x[i] * k"
    # loss[0] = dist(p[0]): p holds vec3, loss floats, no site; the untaped update kernel is no site
    assert BY_NAME["kernel-rmw"].count(PROGRAM) == 1


def test_drop_requires_grad_removes_only_the_flag() -> None:
    m = mutant("drop-requires-grad", 0)
    assert line(m) == "self.y = wp.zeros(4, dtype=float)"


def test_retain_grad_is_added_to_a_requires_grad_allocation() -> None:
    m = mutant("retain-grad")
    assert line(m) == "self.x = wp.zeros(4, dtype=float, requires_grad=True, retain_grad=True)"


def test_step_in_tape_moves_the_optimizer_launch_into_the_tape() -> None:
    m = mutant("step-in-tape")
    lines = m.code.splitlines()
    assert line(m) == "wp.launch(untaped, dim=4, inputs=[self.x, self.x.grad])"
    assert lines[m.line - 2].strip() == "self.simulate(n)"  # last statement of the with body
    assert m.code.count("wp.launch(untaped") == 1


def test_step_into_taped_method_moves_the_update_before_the_backward() -> None:
    m = mutant("step-into-taped-method", source=METHODS)
    lines = m.code.splitlines()
    assert line(m) == "wp.launch(step_kernel, dim=len(self.states[0].qd), inputs=[self.states[0].qd, self.states[0].qd.grad, self.rate])"
    assert lines[m.line - 2].strip() == "self.forward()"
    assert lines[m.line].strip() == "self.tape.backward(self.loss)"
    assert m.code.count("wp.launch(step_kernel") == 1
    assert BY_NAME["step-into-taped-method"].count(PROGRAM) == 0  # the tape and the update share one method


def test_write_before_backward_moves_the_write_between_tape_and_backward() -> None:
    m = mutant("write-before-backward")
    lines = m.code.splitlines()
    assert line(m) == "wp.launch(untaped, dim=4, inputs=[self.x, self.x.grad])"
    assert lines[m.line].strip() == "self.tape.backward(self.loss)"


def test_zero_read_zeroes_an_input_after_its_taped_launch() -> None:
    m = mutant("zero-read")
    assert line(m) == "self.x.zero_()"
    assert "scale" in m.code.splitlines()[m.line - 2]
    # inputs of the launches in simulate (not .grad, not the constant): x, states[-1].q, loss
    assert BY_NAME["zero-read"].count(PROGRAM) == 3


def test_duplicate_launch_repeats_a_taped_launch() -> None:
    m = mutant("duplicate-launch")
    lines = m.code.splitlines()
    assert lines[m.line - 1] == lines[m.line - 2]
    assert "wp.launch(scale" in line(m)
    assert BY_NAME["duplicate-launch"].count(PROGRAM) == 2  # not the untaped update


def test_sqrt_dot_replaces_length_in_a_taped_func() -> None:
    m = mutant("sqrt-dot")
    assert line(m) == "return wp.sqrt(wp.dot(d, d))"


def test_copy_writeback_turns_a_rebinding_into_a_copy() -> None:
    assert REBIND != PROGRAM
    m = mutant("copy-writeback", source=REBIND)
    assert line(m) == "wp.copy(self.x, self.y)"


def test_adjoint_assign_overwrites_the_adjoint() -> None:
    m = mutant("adjoint-assign", source=FUNC_GRAD)
    assert line(m) == "wp.adjoint[x] = 2.0 * x * adj_ret"
    assert BY_NAME["adjoint-assign"].count(PROGRAM) == 0


@pytest.mark.parametrize("op", ops.OPERATORS, ids=lambda op: op.name)
def test_every_operator_keeps_the_rest_of_the_file(op: ops.Operator) -> None:
    """Only the planted lines change: every other line of the file survives in order."""
    import difflib

    source = {"adjoint-assign": FUNC_GRAD, "copy-writeback": REBIND, "step-into-taped-method": METHODS,
              "per-window-backward": PROGRAM + FRAMES}.get(op.name, PROGRAM)
    assert op.count(source) >= 1
    for site in range(op.count(source)):
        m = op.mutate(source, site)
        assert m is not None
        ast.parse(m.code)
        ratio = difflib.SequenceMatcher(a=source.splitlines(), b=m.code.splitlines()).ratio()
        assert ratio > 0.9
    assert op.mutate(source, op.count(source)) is None


# --- the benchmark's judge: recorded losses and leaf gradients ---------------------------------


def record(grad: list[float], loss: float = 1.0, key: str = "k") -> list[dict]:
    return [{"loss": [np.array([loss])], "leaves": {key: [np.array(grad)]}}]


def test_compare_accepts_the_same_gradient_and_reports_a_different_one() -> None:
    want = record([1.0, -2.0, 3.0])
    assert bench.compare(want, record([1.0, -2.0, 3.0 + 1e-7])) == ""
    assert "differs" in bench.compare(want, record([1.0, -2.0, 3.5]))
    assert "missing" in bench.compare(want, record([1.0, -2.0, 3.0], key="other"))
    assert "backwards" in bench.compare(want, want + want)


def test_warpfix_runs_see_the_extra_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """`apply --check` runs the program itself: a program that needs Pillow from --extra-path failed there
    ("requires the Pillow package"), and the fluid mutants were scored "no edit"."""
    monkeypatch.setattr(bench, "EXTRA_PATH", ["/opt/pillow"])
    assert bench.env_for(None)["PYTHONPATH"].split(":") == [str(bench.REPO), "/opt/pillow"]
    assert bench.env_for(Path("/tmp/r.pkl"))["PYTHONPATH"].split(":") == [str(bench.HARNESS), "/opt/pillow"]


def test_first_loss_must_be_bit_identical() -> None:
    assert bench.first_loss_equal(record([0.0], loss=0.1), record([5.0], loss=0.1))
    assert not bench.first_loss_equal(record([0.0], loss=0.1), record([0.0], loss=0.1 + 1e-15))


def test_a_hand_seeded_forward_is_compared_by_its_seeded_values() -> None:
    """drone and fluid_checkpoint_cb seed with ``.grad.fill_`` and record no loss: their forward value is
    the seeded arrays' contents, or a mutant whose forward changed (drone 11.44 -> 16.50) is kept."""
    want = [{"loss": [], "leaves": {"k": [np.array([1.0])]}, "seeded": [np.array([11.44])]}]
    other = [{**want[0], "seeded": [np.array([16.50])]}]
    assert bench.first_loss_equal(want, want)
    assert not bench.first_loss_equal(want, other)
    assert bench.first_loss_equal(want, other, seeded=False)  # a backward moved into the frame loop
    assert "seeded values" in bench.compare(want, other)


def test_a_tape_that_records_fewer_frames_starts_from_some_of_the_same_seeded_arrays() -> None:
    """A tape per frame (the per-frame-tape mutant) records the last frame only: its backward starts from
    the last frame's seeded costs, a subset of the original's with the same values, so its forward is
    unchanged; a changed value, an extra array, or no seeded array at all is a forward change."""
    costs = [np.array([11.44]), np.array([12.0]), np.array([13.5])]
    want = [{"loss": [], "leaves": {"k": [np.array([1.0])]}, "seeded": costs}]
    assert bench.first_loss_equal(want, [{**want[0], "seeded": [costs[2]]}])
    assert not bench.first_loss_equal(want, [{**want[0], "seeded": [np.array([16.50])]}])
    assert not bench.first_loss_equal(want, [{**want[0], "seeded": [costs[2], costs[2]]}])
    assert not bench.first_loss_equal(want, [{**want[0], "seeded": []}])


def test_a_change_in_the_retained_arrays_own_gradient_only_is_not_kept() -> None:
    """WF501 is retain_grad on an array written more than once (its adjoints counted twice upstream);
    on an array written once only its own .grad changes, and the bench must not keep that."""
    want = [{"loss": [np.array([1.0])], "leaves": {"x": [np.array([2.0])], "y": [np.array([0.0])]}}]
    own = [{**want[0], "leaves": {"x": [np.array([2.0])], "y": [np.array([1.0])]}, "retained": ["y"]}]
    upstream = [{**want[0], "leaves": {"x": [np.array([4.0])], "y": [np.array([1.0])]}, "retained": ["y"]}]
    assert bench.retained_only(want, own)
    assert not bench.retained_only(want, upstream)
    assert not bench.retained_only(want, [{**own[0], "retained": []}])  # nothing retained: a real change


TINY = textwrap.dedent(
    """\
    import warp as wp


    @wp.kernel
    def square(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, x[i] * x[i])


    x = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    for _ in range(2):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(square, dim=3, inputs=[x], outputs=[loss])
        tape.backward(loss)
        # no tape.zero(): the second gradient is the sum of both
    print(x.grad.numpy())
    """
)


@pytest.mark.slow
def test_recorder_sees_loss_and_leaf_gradients_of_each_backward(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(TINY)
    program = bench.Program("tiny", tmp_path / "tiny.py", ())
    got, why = bench.run_recorded(tmp_path, program, timeout=300)
    assert got is not None, why
    assert len(got) == 2
    assert got[0]["loss"][0].tolist() == [14.0]
    # x is the only leaf (loss is the seed, not a leaf); the missing zero doubles its gradient
    assert list(got[0]["leaves"]) == list(got[1]["leaves"])
    (grads0,) = got[0]["leaves"].values()
    (grads1,) = got[1]["leaves"].values()
    assert grads0[0].tolist() == [2.0, 4.0, 6.0]
    assert grads1[0].tolist() == [4.0, 8.0, 12.0]
    assert "differs" in bench.compare(got[:1] + got[:1], got)


VIEWED = textwrap.dedent(
    """\
    import warp as wp


    @wp.kernel
    def fill(x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = float(i)


    @wp.kernel
    def square(x: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, x[i, 0] * x[i, 0])


    x = wp.zeros(3, dtype=float, requires_grad=True, retain_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(fill, dim=3, inputs=[x])
        wp.launch(square, dim=3, inputs=[x.reshape((3, 1))], outputs=[loss])
    tape.backward(loss)
    """
)


@pytest.mark.slow
def test_recorder_counts_a_view_of_a_retained_array_as_retained(tmp_path: Path) -> None:
    """newton's bear reads ``phases[frame].reshape(...)``: with ``retain_grad`` on ``phases[frame]`` only the
    retained gradient changes, seen through the view too (both are leaves: ``fill`` lists ``x`` as an input)."""
    (tmp_path / "viewed.py").write_text(VIEWED)
    program = bench.Program("viewed", tmp_path / "viewed.py", ())
    got, why = bench.run_recorded(tmp_path, program, timeout=300)
    assert got is not None, why
    assert len(got[0]["leaves"]) == 2 and sorted(got[0]["retained"]) == sorted(got[0]["leaves"])


SEEDED = textwrap.dedent(
    """\
    import sys
    import warp as wp


    @wp.kernel
    def cost(x: wp.array(dtype=float), scale: float, out: wp.array(dtype=float)):
        i = wp.tid()
        y = x[i] * scale
        out[i] = y * y


    x = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    out = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(cost, dim=3, inputs=[x, float(sys.argv[1])], outputs=[out])
    out.grad.fill_(1.0)
    tape.backward()
    """
)


@pytest.mark.slow
def test_recorder_keeps_the_values_a_hand_seeded_backward_starts_from(tmp_path: Path) -> None:
    (tmp_path / "seeded.py").write_text(SEEDED)
    got, why = bench.run_recorded(tmp_path, bench.Program("seeded", tmp_path / "seeded.py", ("1.0",)), timeout=300)
    assert got is not None, why
    assert got[0]["loss"] == []
    assert [v.tolist() for v in got[0]["seeded"]] == [[1.0, 4.0, 9.0]]
    (grads,) = got[0]["leaves"].values()
    assert grads[0].tolist() == [2.0, 4.0, 6.0]
    changed, why = bench.run_recorded(tmp_path, bench.Program("seeded", tmp_path / "seeded.py", ("2.0",)), timeout=300)
    assert changed is not None, why
    assert not bench.first_loss_equal(got, changed)


CAPTURED = textwrap.dedent(
    """\
    import warp as wp


    @wp.kernel
    def square(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, x[i] * x[i])


    x = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with wp.ScopedCapture() as capture:
        with tape:
            wp.launch(square, dim=3, inputs=[x], outputs=[loss])
        tape.backward(loss)
    assert not x.grad.numpy().any()  # capturing ran nothing
    x.assign([2.0, 2.0, 2.0])
    wp.capture_launch(capture.graph)
    """
)


@pytest.mark.slow
def test_recorder_records_a_captured_backward_when_its_graph_runs(tmp_path: Path) -> None:
    (tmp_path / "captured.py").write_text(CAPTURED)
    got, why = bench.run_recorded(tmp_path, bench.Program("captured", tmp_path / "captured.py", ()), timeout=300)
    assert got is not None, why
    assert len(got) == 1
    assert got[0]["loss"][0].tolist() == [12.0]
    (grads,) = got[0]["leaves"].values()
    assert grads[0].tolist() == [4.0, 4.0, 4.0]


RETAINED = textwrap.dedent(
    """\
    import sys
    import warp as wp


    @wp.kernel
    def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * x[i]


    @wp.kernel
    def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, y[i])


    x = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True, retain_grad=sys.argv[1] == "retain")
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for _ in range(int(sys.argv[2])):  # y is passed in inputs (as warp.fem passes outputs): a leaf
            wp.launch(square, dim=4, inputs=[x, y])
        wp.launch(total, dim=4, inputs=[y, loss])
    tape.backward(loss)
    """
)


@pytest.mark.slow
def test_retain_grad_on_an_array_written_once_changes_only_its_own_gradient(tmp_path: Path) -> None:
    (tmp_path / "retained.py").write_text(RETAINED)
    got = {}
    for flag in ("plain", "retain"):
        for writes in ("1", "2"):
            program = bench.Program("retained", tmp_path / "retained.py", (flag, writes))
            got[flag, writes], why = bench.run_recorded(tmp_path, program, timeout=300)
            assert got[flag, writes] is not None, why
    assert got["retain", "1"][0]["retained"] and not got["plain", "1"][0]["retained"]
    assert bench.compare(got["plain", "1"], got["retain", "1"])  # y's own .grad is kept: 1 instead of 0
    assert bench.retained_only(got["plain", "1"], got["retain", "1"])
    # written twice (RULES.md's WF501): x's gradient is counted twice, a real bug the bench keeps
    assert not bench.retained_only(got["plain", "2"], got["retain", "2"])


# --- WF601: the tape moved into the frame loop ----------------------------------------------

FRAMES = textwrap.dedent(
    '''\
    import warp as wp


    class Example:
        def forward_backward(self):
            self.tape = wp.Tape()
            with self.tape:
                self.forward()
            self.tape.backward(self.loss)

        def forward(self):
            """The episode."""
            wp.launch(assign_param, dim=1, inputs=[self.param], outputs=[self.states[0].q])
            # run the frames
            for frame in range(self.frames):
                self.simulate(frame)
            wp.launch(loss_kernel, dim=1, inputs=[self.states[-1].q], outputs=[self.loss])
            return self.loss

        def rollout(self):
            self.tape = wp.Tape()
            with self.tape:
                self.costs.zero_()
                for i in range(self.steps):
                    self.simulate(i)
                    wp.launch(cost, dim=1, inputs=[self.states[i + 1].q], outputs=[self.costs])
            self.costs.grad.fill_(1.0)
            self.tape.backward()
    '''
)


def test_per_frame_tape_records_each_frame_on_a_new_tape_and_keeps_the_one_backward() -> None:
    op = BY_NAME["per-frame-tape"]
    assert op.count(FRAMES) == 2  # through the called method, and the loop inside the block
    m = mutant("per-frame-tape", 0, FRAMES)
    body = m.code[m.code.index("    def forward_backward"):m.code.index("    def forward(self)")]
    assert body == textwrap.indent(textwrap.dedent(
        '''\
        def forward_backward(self):
            self.tape = wp.Tape()
            with self.tape:
                wp.launch(assign_param, dim=1, inputs=[self.param], outputs=[self.states[0].q])
            # run the frames
            for frame in range(self.frames):
                self.tape = wp.Tape()
                with self.tape:
                    self.simulate(frame)
            with self.tape:
                wp.launch(loss_kernel, dim=1, inputs=[self.states[-1].q], outputs=[self.loss])
            self.tape.backward(self.loss)

        '''), "    ")
    assert "def forward(self):" in m.code  # the method stays for its other callers
    lines = m.code.splitlines()
    assert {lines[n - 1].strip() for n in m.anchors} == {"self.tape = wp.Tape()", "self.tape.backward(self.loss)"}
    assert m.code.count("self.tape.backward(") == 2


def test_per_window_backward_runs_a_backward_per_frame_where_the_objective_is_written_in_the_loop() -> None:
    op = BY_NAME["per-window-backward"]
    assert op.count(FRAMES) == 1  # forward_backward's objective is computed after the loop: no site
    m = mutant("per-window-backward", 0, FRAMES)
    body = m.code[m.code.index("    def rollout"):]
    assert body == textwrap.indent(textwrap.dedent(
        '''\
        def rollout(self):
            self.tape = wp.Tape()
            with self.tape:
                self.costs.zero_()
            for i in range(self.steps):
                self.tape = wp.Tape()
                with self.tape:
                    self.simulate(i)
                    wp.launch(cost, dim=1, inputs=[self.states[i + 1].q], outputs=[self.costs])
                self.costs.grad.fill_(1.0)
                self.tape.backward()
        '''), "    ")
    assert any(m.code.splitlines()[n - 1].strip() == "self.tape.backward()" for n in m.anchors)


def test_per_frame_tape_leaves_loops_it_cannot_move() -> None:
    op = BY_NAME["per-frame-tape"]
    # the callee's local names meet the caller's, a break, a return value that is used: no site
    clash = FRAMES.replace("self.forward()\n        self.tape", "self.forward()\n        frame = 0\n        self.tape", 1)
    assert op.count(clash) == 1
    assert op.count(FRAMES.replace("self.simulate(frame)", "self.simulate(frame)\n            break")) == 1
    assert op.count(FRAMES.replace("            self.forward()", "            loss = self.forward()")) == 1


def test_drop_requires_grad_skips_what_warp_stops_itself() -> None:
    """A backward's seed without requires_grad, or an array whose .grad the program reads, stops the program
    with Warp's own error: 12 of last round's mutants crashed so, none a silent gradient bug."""
    op = BY_NAME["drop-requires-grad"]
    assert op.count(PROGRAM) == 1  # self.x: x.grad is read; self.loss: the backward's seed
    source = textwrap.dedent(
        '''\
        import warp as wp
        buf = []
        buf.append(wp.zeros(3, requires_grad=True))
        other = [wp.zeros(3, requires_grad=True)]
        wp.copy(buf[0].grad, other[0])
        loss = wp.zeros(1, requires_grad=True)
        tape.backward(loss=loss)
        '''
    )
    m = mutant("drop-requires-grad", 0, source)
    assert line(m) == "other = [wp.zeros(3)]"
    assert op.count(source) == 1


def test_a_forward_change_is_judged_on_the_first_backwards_leaf_gradients() -> None:
    """A mutant whose loss changed is still a bug when its gradients changed too (scored by check), and no
    bug when they did not; the loss difference alone says nothing about the gradient."""
    want = record([1.0, 2.0], loss=1.0)
    assert bench.first_gradient_diff(want, record([1.0, 2.0], loss=5.0)) == ""
    assert "differs" in bench.first_gradient_diff(want, record([1.0, 3.0], loss=5.0))


def test_the_table_shows_forward_changed_mutants_and_their_check_hits_beside_the_kept() -> None:
    from types import SimpleNamespace

    outcomes = [
        bench.Outcome("ball", "alias-step", "WF104", 0, 10, "forward-changed", check_hit=True),
        bench.Outcome("drone", "alias-step", "WF104", 0, 12, "forward-changed", check_hit=False),
        bench.Outcome("spring_cage", "alias-step", "WF104", 0, 11, "kept", check_hit=True, fixed=True),
        bench.Outcome("ball", "alias-step", "WF104", 1, 14, "crash"),
    ]
    fake = SimpleNamespace(outcomes=outcomes, sites={("ball", "alias-step"): 2, ("spring_cage", "alias-step"): 1})
    row = next(line for line in bench.table(fake, [BY_NAME["alias-step"]], True).splitlines() if "alias-step" in line)
    #              sites tried kept check fixed bad-keep static fwd-chg fc-check
    assert row.split()[2:] == ["3", "4", "1", "1", "1", "0", "0", "2", "1"]
    lines = bench.by_program(fake, True).splitlines()
    assert "kept 0: check 0, fixed 0; forward-changed 1: check 1" in lines[0]
    assert "spring_cage" in lines[2] and "kept 1: check 1, fixed 1" in lines[2]
