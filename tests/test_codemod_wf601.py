"""WF601 hoist codemod: exact rewrites of the supported shapes, skips of the others, and the goldens.

The golden tests run the checker on each ``golden/WF601-*/buggy`` program and require the
codemod's rewrite to be exactly ``fixed/``; the slow ones run ``warpfix verify`` on both:
the buggy program fails with the cross-window signature, the rewrite passes over the whole
episode.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext, CodemodTest, SkipFile

from codemods.wf601_hoist import HoistWindowTape
from warpfix.engine import check_paths
from warpfix.fixes import compute_edits
from warpfix.verify import run_verify

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CASES = ("WF601-per-window-tape", "WF601-state-list-helper", "WF601-class-substeps", "WF601-shared-episode-loss",
         "WF601-with-tape-per-window")

_INLINE_BEFORE = '''
        import warp as wp


        def train(thrust, q0, v0):
            grad_sum = wp.zeros(1, dtype=wp.vec3)
            for it in range(3):
                grad_sum.zero_()
                q, v = wp.clone(q0), wp.clone(v0)
                for frame in range(4):
                    loss = wp.zeros(1, dtype=float, requires_grad=True)
                    tape = wp.Tape()
                    with tape:
                        q_next = wp.zeros_like(q)
                        v_next = wp.zeros_like(v)
                        wp.launch(step, dim=8, inputs=[q, v, thrust], outputs=[q_next, v_next])
                        wp.launch(distance, dim=8, inputs=[q_next], outputs=[loss])
                    tape.backward(loss)
                    wp.launch(accumulate, dim=1, inputs=[grad_sum, thrust.grad])
                    tape.zero()
                    q, v = q_next, v_next
                wp.launch(sgd, dim=1, inputs=[thrust, grad_sum, 0.01])
'''

_INLINE_AFTER = '''
        import warp as wp


        @wp.kernel
        def accumulate_loss(term: wp.array(dtype=float), total: wp.array(dtype=float)):
            """Add one window's loss to the episode loss, on the tape (warpfix WF601)."""
            wp.atomic_add(total, 0, term[0])


        def train(thrust, q0, v0):
            for it in range(3):
                q, v = wp.clone(q0), wp.clone(v0)
                loss_total = wp.zeros(1, dtype=float, requires_grad=True)
                tape = wp.Tape()
                with tape:
                    for frame in range(4):
                        loss = wp.zeros(1, dtype=float, requires_grad=True)
                        q_next = wp.zeros_like(q)
                        v_next = wp.zeros_like(v)
                        wp.launch(step, dim=8, inputs=[q, v, thrust], outputs=[q_next, v_next])
                        wp.launch(distance, dim=8, inputs=[q_next], outputs=[loss])
                        wp.launch(accumulate_loss, dim=1, inputs=[loss], outputs=[loss_total])
                        q, v = q_next, v_next
                tape.backward(loss_total)
                wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
                tape.zero()
'''

_HELPER_BEFORE = '''
        import warp as wp

        FRAMES = 3
        STEPS = 4


        def rollout(states, wind, grad):
            for f in range(FRAMES):
                loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
                tape = wp.Tape()
                with tape:
                    simulate(states, wind, loss)
                tape.backward(loss)
                wp.launch(add, dim=1, inputs=[grad, wind.grad])
                tape.zero()
                states[0] = states[-1]


        def main():
            wind = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
            grad = wp.zeros(1, dtype=wp.vec3)
            states = [State() for _ in range(STEPS + 1)]
            for it in range(5):
                grad.zero_()
                rollout(states, wind, grad)
                wp.launch(sgd, dim=1, inputs=[wind, grad, 0.1])
'''

_HELPER_AFTER = '''
        import warp as wp

        FRAMES = 3
        STEPS = 4


        @wp.kernel
        def accumulate_loss(term: wp.array(dtype=wp.float64), total: wp.array(dtype=wp.float64)):
            """Add one window's loss to the episode loss, on the tape (warpfix WF601)."""
            wp.atomic_add(total, 0, term[0])


        def rollout(states, wind, grad):
            loss_total = wp.zeros(1, dtype=wp.float64, requires_grad=True)
            tape = wp.Tape()
            with tape:
                for f in range(FRAMES):
                    loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
                    simulate(states[f * STEPS:(f + 1) * STEPS + 1], wind, loss)
                    wp.launch(accumulate_loss, dim=1, inputs=[loss], outputs=[loss_total])
            tape.backward(loss_total)
            wp.launch(add, dim=1, inputs=[grad, wind.grad])
            tape.zero()


        def main():
            wind = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
            grad = wp.zeros(1, dtype=wp.vec3)
            # warpfix WF601: one state per step of the whole episode (STEPS + 1 for one window before)
            states = [State() for _ in range(FRAMES * STEPS + 1)]
            for it in range(5):
                grad.zero_()
                rollout(states, wind, grad)
                wp.launch(sgd, dim=1, inputs=[wind, grad, 0.1])
'''

_METHOD_BEFORE = '''
        import numpy as np
        import warp as wp

        FRAMES, SUBSTEPS = 5, 2
        model = Model()
        gains = wp.ones(2, dtype=float, requires_grad=True)
        ctrl = wp.zeros(16, dtype=wp.vec2, requires_grad=True)
        states = [model.state() for _ in range(SUBSTEPS + 1)]
        for it in range(10):
            model.reset(states[0])
            g = np.zeros(2)
            for frame in range(FRAMES):
                loss = wp.zeros(1, dtype=float, requires_grad=True)
                tape = wp.Tape()
                with tape:
                    wp.launch(policy, dim=16, inputs=[states[0].q, gains], outputs=[ctrl])
                    for s in range(SUBSTEPS):
                        model.step(states[s], states[s + 1], ctrl)
                    wp.launch(cost, dim=16, inputs=[states[-1].q], outputs=[loss])
                tape.backward(loss)
                g += gains.grad.numpy()
                tape.zero()
                wp.copy(states[0].q, states[-1].q)
                wp.copy(states[0].qd, states[-1].qd)
            gains.assign(gains.numpy() - 0.01 * g)
'''

_METHOD_AFTER = '''
        import numpy as np
        import warp as wp


        @wp.kernel
        def accumulate_loss(term: wp.array(dtype=float), total: wp.array(dtype=float)):
            """Add one window's loss to the episode loss, on the tape (warpfix WF601)."""
            wp.atomic_add(total, 0, term[0])


        FRAMES, SUBSTEPS = 5, 2
        model = Model()
        gains = wp.ones(2, dtype=float, requires_grad=True)
        ctrl = wp.zeros(16, dtype=wp.vec2, requires_grad=True)
        # warpfix WF601: one state per step of the whole episode (SUBSTEPS + 1 for one window before)
        states = [model.state() for _ in range(FRAMES * SUBSTEPS + 1)]
        for it in range(10):
            model.reset(states[0])
            loss_total = wp.zeros(1, dtype=float, requires_grad=True)
            tape = wp.Tape()
            with tape:
                for frame in range(FRAMES):
                    ctrl = wp.zeros(16, dtype=wp.vec2, requires_grad=True)
                    loss = wp.zeros(1, dtype=float, requires_grad=True)
                    wp.launch(policy, dim=16, inputs=[states[frame * SUBSTEPS].q, gains], outputs=[ctrl])
                    for s in range(SUBSTEPS):
                        model.step(states[frame * SUBSTEPS + s], states[frame * SUBSTEPS + s + 1], ctrl)
                    wp.launch(cost, dim=16, inputs=[states[(frame + 1) * SUBSTEPS].q], outputs=[loss])
                    wp.launch(accumulate_loss, dim=1, inputs=[loss], outputs=[loss_total])
            tape.backward(loss_total)
            gains.assign(gains.numpy() - 0.01 * gains.grad.numpy())
            tape.zero()
'''

_CARRY_BEFORE = """
    def train(thrust, n):
        q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        v = wp.ones(n, dtype=wp.vec3, requires_grad=True)
        for it in range(3):
            for frame in range(4):
                loss = wp.zeros(1, dtype=float, requires_grad=True)
                tape = wp.Tape()
                with tape:
                    q_next = wp.zeros_like(q)
                    v_next = wp.zeros_like(v)
                    wp.launch(step, dim=n, inputs=[q, v, thrust], outputs=[q_next, v_next])
                    wp.launch(distance, dim=n, inputs=[q_next], outputs=[loss])
                tape.backward(loss)
                q, v = q_next, v_next
            wp.launch(sgd, dim=1, inputs=[thrust, thrust.grad, 0.01])
            tape.zero()
"""

_PINGPONG_BEFORE = """
    def train(thrust, start, n):
        for it in range(3):
            x = wp.zeros(n, dtype=wp.vec3)
            v = wp.array(start, dtype=wp.vec3)
            x_out = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
            v_out = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
            for frame in range(5):
                tape = wp.Tape()
                with tape:
                    loss = wp.zeros(1, dtype=float, requires_grad=True)
                    wp.launch(step, dim=n, inputs=[x, v, thrust], outputs=[x_out, v_out])
                    wp.launch(track, dim=n, inputs=[x_out], outputs=[loss])
                tape.backward(loss)
                tape.zero()
                wp.copy(x, x_out)
                v, v_out = v_out, v
"""


class TestHoist(CodemodTest):
    TRANSFORM = HoistWindowTape

    def test_inline_frame_loop(self) -> None:
        """Tape and loss hoisted, the accumulation buffer and its reset gone, sgd reads thrust.grad."""
        self.assertCodemod(_INLINE_BEFORE, _INLINE_AFTER, line=17, grad_reads=[18], tape_zero_lines=[19])

    def test_helper_receiving_the_state_list(self) -> None:
        """The caller's state list grows, the helper passes each window its slice, the alias goes; the
        gradient buffer is the helper's parameter, so it is filled once after the backward."""
        self.assertCodemod(_HELPER_BEFORE, _HELPER_AFTER, line=13)

    def test_substeps_in_a_method_with_state_objects(self) -> None:
        """Module-level loop: indices rewritten per window, copies gone, the scratch control array
        allocated per window, the host accumulator replaced by gains.grad.numpy()."""
        self.assertCodemod(_METHOD_BEFORE, _METHOD_AFTER, line=20)

    def test_state_allocated_before_the_training_loop_is_fresh_every_iteration(self) -> None:
        out = _rewrite(_CARRY_BEFORE, 13, carried=["q", "v"])
        head = "    for it in range(3):\n        q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)\n"
        assert head + "        v = wp.ones(n, dtype=wp.vec3, requires_grad=True)\n" in out
        assert out.count("q = wp.zeros(n") == 2

    def test_copy_and_swap_carries_become_rebindings_of_per_window_buffers(self) -> None:
        out = _rewrite(_PINGPONG_BEFORE.replace("                tape.zero()\n", ""), 13)
        window = (
            "            for frame in range(5):\n"
            "                x_out = wp.zeros(n, dtype=wp.vec3, requires_grad=True)\n"
            "                v_out = wp.zeros(n, dtype=wp.vec3, requires_grad=True)\n"
            "                loss = wp.zeros(1, dtype=float, requires_grad=True)\n"
        )
        assert window in out
        assert "                x = x_out\n                v = v_out\n        tape.backward(loss_total)\n" in out
        assert "wp.copy(" not in out

    def test_skips_a_copy_from_a_buffer_shared_by_the_windows(self) -> None:
        before = _dedent(_PINGPONG_BEFORE).replace("wp.copy(x, x_out)", "wp.copy(x, v)")
        self._skip(before, 13, "copies v into x for the next window, but v is not allocated per window")

    def test_summary_states_the_memory_added(self) -> None:
        context = CodemodContext(filename="m.py", scratch={})
        HoistWindowTape(context, line=20).transform_module(cst.parse_module(_dedent(_METHOD_BEFORE)))
        summary = context.scratch["summary"]
        assert "(FRAMES - 1) * SUBSTEPS extra state buffers x the bytes of one `model.state()`" in summary
        assert "gradient checkpointing" in summary

    def test_skips_a_tape_created_outside_the_window_loop(self) -> None:
        before = _dedent(_INLINE_BEFORE).replace("            tape = wp.Tape()\n", "").replace(
            "        grad_sum.zero_()\n", "        grad_sum.zero_()\n        tape = wp.Tape()\n")
        self._skip(before, 17, "reused tape")

    def test_skips_a_loss_allocated_once(self) -> None:
        before = _dedent(_INLINE_BEFORE).replace("            loss = wp.zeros(1, dtype=float, requires_grad=True)\n", "")
        self._skip(before, 16, "is neither allocated in the window loop nor zeroed there with loss.zero_()")

    def test_loss_zeroed_per_window_becomes_a_fresh_array_per_window(self) -> None:
        before = _dedent(_INLINE_BEFORE).replace(
            "            loss = wp.zeros(1, dtype=float, requires_grad=True)\n", "            loss.zero_()\n"
        ).replace("    grad_sum = wp.zeros(1, dtype=wp.vec3)\n",
                  "    grad_sum = wp.zeros(1, dtype=wp.vec3)\n    loss = wp.zeros(1, dtype=float, requires_grad=True)\n")
        out = _rewrite(before, 18)
        assert "            for frame in range(4):\n                loss = wp.zeros_like(loss)\n" in out
        assert "loss.zero_()" not in out
        assert "        tape.backward(loss_total)\n" in out

    def test_skips_a_gradient_read_that_is_not_an_accumulation(self) -> None:
        before = _dedent(_INLINE_BEFORE).replace("inputs=[grad_sum, thrust.grad])", "inputs=[grad_sum, thrust.grad], outputs=[g])")
        self._skip(before, 17, "is not an accumulation")

    def test_skips_an_early_exit(self) -> None:
        before = _dedent(_INLINE_BEFORE).replace("            q, v = q_next, v_next\n",
                                        "            q, v = q_next, v_next\n            if frame > 2:\n"
                                        "                break\n")
        self._skip(before, 17, "`break` at line 22 leaves the window loop early")

    def test_skips_a_state_list_allocated_elsewhere(self) -> None:
        before = _dedent(_HELPER_BEFORE).replace("    states = [State() for _ in range(STEPS + 1)]\n",
                                        "    states = make_states()\n")
        self._skip(before, 13, "not allocated as `[... for _ in range(steps + 1)]`")
        before = _dedent(_HELPER_BEFORE).split("def main")[0]
        self._skip(before, 13, "no allocation(s) in this file")

    def test_skips_a_state_list_the_rewrite_cannot_reindex(self) -> None:
        before = _dedent(_METHOD_BEFORE).replace("        tape.zero()\n", "        tape.zero()\n        log([st.q for st in states])\n")
        self._skip(before, 20, "in a way the hoist cannot re-index")

    def test_skips_a_frame_count_unknown_where_the_states_are_allocated(self) -> None:
        before = _dedent(_HELPER_BEFORE).replace("def rollout(states, wind, grad):", "def rollout(states, wind, grad, FRAMES):")
        self._skip(before, 13, "the frame count FRAMES is not defined")

    def test_skips_an_in_place_update_of_a_scratch_array(self) -> None:
        before = _dedent(_METHOD_BEFORE).replace("inputs=[states[0].q, gains]", "inputs=[states[0].q, gains, ctrl]")
        self._skip(before, 20, "updates ctrl in place")

    def test_sum_written_back_into_the_gradient_is_kept(self) -> None:
        """Blind corpus 4's plate_cooling: the windows' sum goes back into ``gains.grad`` for a later method's
        update. The sum stays, taken once after the hoisted backward and before the tape's clear, so the write-back
        hands on what it did (a ``tape.zero()`` after it would zero what the update reads)."""
        before = _dedent(_METHOD_BEFORE).replace(
            "gains.assign(gains.numpy() - 0.01 * g)", "gains.grad.assign(g)")
        after = _rewrite(before, 20)
        tail = after[after.index("tape.backward(loss_total)"):]
        assert tail.index("g += gains.grad.numpy()") < tail.index("tape.zero()") < tail.index("gains.grad.assign(g)")
        assert "g = np.zeros(2)" in after

    def test_other_lines_are_left_alone(self) -> None:
        self._skip(_INLINE_BEFORE, 16, "no `tape.backward(loss)` call")

    def _skip(self, before: str, line: int, why: str) -> None:
        with pytest.raises(SkipFile, match=re.escape(why)):
            _rewrite(before, line)


def _dedent(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def _rewrite(code: str, line: int, **data: object) -> str:
    context = CodemodContext(filename="main.py", scratch={})
    return HoistWindowTape(context, line=line, **data).transform_module(cst.parse_module(_dedent(code))).code


def _texts(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py"))}


def _wf601(folder: Path) -> list:
    result = check_paths([str(folder)], use_cache=False)
    return [f for f in result.findings if f.rule == "WF601"]


@pytest.mark.parametrize("case", CASES)
def test_golden_rewrite_is_exactly_fixed(case: str) -> None:
    buggy, fixed = GOLDEN / case / "buggy", GOLDEN / case / "fixed"
    findings = _wf601(buggy)
    assert len(findings) == 1
    sources = {str(buggy / name): text for name, text in _texts(buggy).items()}
    result = compute_edits(sources, findings)
    assert not result.skipped
    rewritten = {Path(p).name: t for p, t in {**sources, **result.new_sources}.items()}
    assert rewritten == _texts(fixed)
    assert not _wf601(fixed)  # a second apply has nothing to do


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_golden_verify_fails_across_windows_then_passes(case: str) -> None:
    before = run_verify(["python", "main.py"], cwd=str(GOLDEN / case / "buggy"), timeout=300)
    verdicts = [(p.verdict, p.signature) for b in before.backwards for p in b.params]
    assert ("fail", "cross-window") in verdicts
    after = run_verify(["python", "main.py"], cwd=str(GOLDEN / case / "fixed"), timeout=300)
    params = [p for b in after.backwards for p in b.params]
    assert params and all(p.verdict == "pass" for p in params)
    assert after.exit_code == 0


def test_apply_reports_the_memory_the_hoist_adds(tmp_path, monkeypatch) -> None:
    """The edit summary names the extra state buffers (the issue: memory cost of a full-horizon tape)."""
    import shutil

    from warpfix.apply import Selection, plan_fixes

    work = tmp_path / "buggy"
    shutil.copytree(GOLDEN / "WF601-state-list-helper" / "buggy", work)
    monkeypatch.chdir(work)
    result = plan_fixes(["."], selection=Selection(select=["WF601"], use_cache=False))
    (edit,) = [e for e in result.edits if e.kept]
    assert "extra state buffers" in edit.reason and "gradient checkpointing" in edit.reason


def test_a_per_window_optimizer_step_is_refused_as_truncated_training() -> None:
    from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
    from warpfix.fixes import compute_edits

    before = _dedent(_INLINE_BEFORE).replace(
        "inputs=[grad_sum, thrust.grad])", "inputs=[thrust, thrust.grad, 0.1])"
    )
    finding = Finding(rule="WF601", name="per-window-tape", severity=Severity.ERROR,
                      span=Span("m.py", 17, 1, 17, 2), message="m", fix=Fix(FixSafety.SAFE, "hoist"), data={})
    result = compute_edits({"m.py": before}, [finding])
    assert result.new_sources == {}
    assert "optimizer step inside the window loop" in result.skipped[0][1]
