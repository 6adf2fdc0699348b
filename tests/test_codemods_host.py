"""Before/after tests of the host-code codemods: rebinding, fresh buffers, statement moves."""

from __future__ import annotations

import textwrap

from libcst.codemod import CodemodTest

from codemods.wf101_copy_rebind import CopyToRebind
from codemods.wf102_copy_kernel import CopyKernel
from codemods.wf103_rotate import RotateBuffers
from codemods.wf104_fresh_output import FreshOutput
from codemods.wf105_fresh_fill import FreshFill
from codemods.wf301_tape_zero import ZeroTape
from codemods.wf302_after_backward import MoveAcrossBackward


class TestCopyToRebind(CodemodTest):
    TRANSFORM = CopyToRebind

    def test_copy(self) -> None:
        before = """
            with tape:
                q_proj = wp.empty_like(state.q)
                wp.launch(project, dim=n, inputs=[state.q], outputs=[q_proj])
                wp.copy(state.q, q_proj)  # write back
        """
        after = """
            with tape:
                q_proj = wp.empty_like(state.q)
                wp.launch(project, dim=n, inputs=[state.q], outputs=[q_proj])
                state.q = q_proj  # write back
        """
        self.assertCodemod(before, after, line=4)

    def test_assign_with_data(self) -> None:
        self.assertCodemod("y = f()\nx.assign(y)\n", "y = f()\nx = y\n", line=2, dst="x", src="y")

    def test_long_lived_source_gets_a_fresh_buffer_per_step(self) -> None:
        """``self.v[t + 1] = self.vd[t]`` would alias two long-lived list elements from the 2nd iteration on."""
        before = """
            class Sim:
                def step(self, t):
                    wp.launch(damp, dim=n, inputs=[self.v[t + 1]], outputs=[self.vd[t]])
                    wp.copy(self.v[t + 1], self.vd[t])
        """
        self.assertCodemod(before, before.replace(
            "wp.copy(self.v[t + 1], self.vd[t])", "self.v[t + 1] = wp.clone(self.vd[t])"), line=4)

    def test_source_allocated_outside_the_loop_gets_a_fresh_buffer(self) -> None:
        before = """
            def run(state, n):
                tmp = wp.empty_like(state.q)
                for t in range(n):
                    wp.launch(project, dim=n, inputs=[state.q], outputs=[tmp])
                    wp.copy(state.q, tmp)
        """
        self.assertCodemod(before, before.replace("wp.copy(state.q, tmp)", "state.q = wp.clone(tmp)"), line=5)

    def test_wrong_data_is_skipped(self) -> None:
        self.assertCodemod("wp.copy(x, y)\n", "wp.copy(x, y)\n", line=1, dst="y", expected_skip=True)

    def test_offsets_are_skipped(self) -> None:
        code = "wp.copy(x, y, dest_offset=4)\n"
        self.assertCodemod(code, code, line=1, expected_skip=True)

    def test_function_parameter_is_skipped(self) -> None:
        code = """
            def project(q, q_proj):
                wp.copy(q, q_proj)
        """
        self.assertCodemod(code, code, line=2, expected_skip=True)


class TestRotateBuffers(CodemodTest):
    TRANSFORM = RotateBuffers

    def test_rotate(self) -> None:
        before = "states[0] = states[-1]  # next window\n"
        after = "states[0], states[-1] = states[-1], states[0]  # next window\n"
        self.assertCodemod(before, after, line=1)

    def test_call_is_skipped(self) -> None:
        self.assertCodemod("a = wp.clone(b)\n", "a = wp.clone(b)\n", line=1, expected_skip=True)

    def test_rebinding_recorded_by_the_tape_gives_the_source_a_fresh_buffer(self) -> None:
        """A class frame loop inside one tape: rotating would hand slot S the buffer frame 1 read."""
        before = """
            class Sim:
                def frame(self):
                    for s in range(self.substeps):
                        wp.launch(integrate, dim=n, inputs=[self.v[s]], outputs=[self.v[s + 1]])
                    self.v[0] = self.v[self.substeps]
        """
        after = before.replace("self.v[0] = self.v[self.substeps]\n", "self.v[0] = self.v[self.substeps]\n"
                               "                    self.v[self.substeps] = wp.empty_like(self.v[self.substeps])\n")
        self.assertCodemod(before, after, line=5, recorded=True)

    def test_repeated_constructor_becomes_one_call_per_slot(self) -> None:
        """``[self.model.state()] * (n + 1)`` (newton's spring_cage with the comprehension undone)."""
        before = "self.states = [self.model.state()] * (self.sim_steps * self.sim_substeps + 1)  # all steps\n"
        after = ("self.states = [self.model.state() for _ in range(self.sim_steps * self.sim_substeps + 1)]"
                 "  # all steps\n")
        self.assertCodemod(before, after, line=1, repeat=True)

    def test_repeat_on_the_left_and_a_taken_name(self) -> None:
        before = "omega = (T + 1) * [wp.zeros(n, dtype=float, requires_grad=_)]\n"
        after = "omega = [wp.zeros(n, dtype=float, requires_grad=_) for _2 in range(T + 1)]\n"
        self.assertCodemod(before, after, line=1, repeat=True)

    def test_repeated_existing_object_is_skipped(self) -> None:
        """``[state] * n`` has no constructor to call again: no fix, with the reason."""
        self.assertCodemod("states = [state] * 4\n", "states = [state] * 4\n", line=1, repeat=True,
                           expected_skip=True)


class TestFreshOutput(CodemodTest):
    TRANSFORM = FreshOutput

    def test_fresh_output_before_write(self) -> None:
        before = """
            with tape:
                for step in range(steps):
                    # advance
                    wp.launch(integrate, dim=n, inputs=[cur], outputs=[nxt])
                    cur, nxt = nxt, cur
        """
        after = """
            with tape:
                for step in range(steps):
                    # advance
                    nxt = wp.empty_like(nxt)
                    wp.launch(integrate, dim=n, inputs=[cur], outputs=[nxt])
                    cur, nxt = nxt, cur
        """
        self.assertCodemod(before, after, line=5)

    def test_read_and_written_is_skipped(self) -> None:
        code = """
            for step in range(steps):
                wp.launch(k, dim=n, inputs=[a, b], outputs=[b])
                a, b = b, a
        """
        self.assertCodemod(code, code, line=3, expected_skip=True)


class TestFreshState(CodemodTest):
    """WF104 at a library step handed two states swapped in its loop (the blind corpus's spring_chain: newton's
    ``state_0``/``state_1`` double buffer inside the tape)."""

    TRANSFORM = FreshOutput
    TRAINER = """
        class Trainer:
            def __init__(self):
                self.state_0 = self.model.state()
                self.state_1 = self.model.state()

            def forward(self):
                with self.tape:
                    for f in range(self.frames):
                        self.state_0.clear_forces()
                        self.solver.step(self.state_0, self.state_1, self.control, None, self.dt)
                        self.state_0, self.state_1 = self.state_1, self.state_0
    """

    def test_each_step_writes_a_fresh_state_built_as_the_program_built_it(self) -> None:
        step = " " * 24 + "self.solver.step("
        after = self.TRAINER.replace(step, " " * 24 + "self.state_1 = self.model.state()\n" + step)
        self.assertCodemod(self.TRAINER, after, line=10, arg="self.state_1.particle_qd")

    def test_a_state_built_twice_gets_no_guess(self) -> None:
        code = self.TRAINER.replace("            def forward(self):",
                                    "            def reset(self):\n                self.state_1 = other.state()\n\n"
                                    "            def forward(self):")
        self.assertCodemod(code, code, line=13, arg="self.state_1.particle_qd", expected_skip=True)

    def test_a_step_without_a_swap_is_skipped(self) -> None:
        code = self.TRAINER.replace("                self.state_0, self.state_1 = self.state_1, self.state_0\n", "")
        self.assertCodemod(code, code, line=10, arg="self.state_1.particle_qd", expected_skip=True)


class TestFreshFill(CodemodTest):
    TRANSFORM = FreshFill

    def test_zero(self) -> None:
        before = "import warp\nforces.zero_()\n"
        after = "import warp\nforces = warp.zeros_like(forces)\n"
        self.assertCodemod(before, after, line=2)

    def test_fill(self) -> None:
        self.assertCodemod("state.f.fill_(1.5)\n", "state.f = wp.full_like(state.f, 1.5)\n", line=1)

    def test_grad_is_skipped(self) -> None:
        self.assertCodemod("x.grad.zero_()\n", "x.grad.zero_()\n", line=1, expected_skip=True)


class TestZeroTape(CodemodTest):
    TRANSFORM = ZeroTape


    def test_zero_before_backward_where_the_tape_is_already_cleared(self) -> None:
        """Blind corpus 4's plate_cooling after its hoist: the method clears its tape, then writes the sum back into
        ``self.k.grad`` for a later ``update()``; the next call's backward adds onto it. The last resort clears
        the named gradient before the backward."""
        before = """
            class Inv:
                def __init__(self):
                    self.k = wp.zeros(4, requires_grad=True)

                def forward(self):
                    tape = wp.Tape()
                    with tape:
                        run(self.k, self.loss)
                    tape.backward(self.loss)
                    g = self.k.grad.numpy()
                    tape.zero()
                    self.k.grad.assign(g)
        """
        after = before.replace("                    tape.backward(self.loss)\n",
                               "                    self.k.grad.zero_()\n                    tape.backward(self.loss)\n")
        self.assertCodemod(before, after, line=9, arrays=["self.k"])
    def test_end_of_loop(self) -> None:
        before = """
            for it in range(iters):
                with tape:
                    forward()
                tape.backward(loss)
                step(params, params.grad)
        """
        after = """
            for it in range(iters):
                with tape:
                    forward()
                tape.backward(loss)
                step(params, params.grad)
                tape.zero()
        """
        self.assertCodemod(before, after, line=4)

    def test_before_continue(self) -> None:
        before = """
            while True:
                self.tape.backward(loss=l)
                continue
        """
        after = """
            while True:
                self.tape.backward(loss=l)
                self.tape.zero()
                continue
        """
        self.assertCodemod(before, after, line=2)

    def test_arrays_when_the_backward_is_in_no_loop_of_its_function(self) -> None:
        before = """
            def fit(self, w):
                with wp.Tape() as tape:
                    forward(w, self.b)
                tape.backward(loss)
        """
        after = """
            def fit(self, w):
                with wp.Tape() as tape:
                    forward(w, self.b)
                w.grad.zero_()
                self.b.grad.zero_()
                tape.backward(loss)
        """
        self.assertCodemod(before, after, line=4, arrays=["w", "self.b"])

    def test_arrays_not_visible_in_the_function_are_skipped(self) -> None:
        before = """
            def fit(w):
                tape.backward(loss)
        """
        self.assertCodemod(before, before, line=2, arrays=["params"], expected_skip=True)

    def test_after_the_consumer_in_the_method_that_calls_the_backward(self) -> None:
        # newton's trainers: forward_backward() records and backs off a fresh self.tape; step(), run by
        # a library runner, consumes the gradient; the zero belongs right after that consumer
        before = """
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
                    x = self.states[0].particle_qd
                    wp.launch(step_kernel, dim=len(x), inputs=[x, x.grad, self.train_rate])
                    self.train_iter += 1
        """
        after = before.replace(
            "inputs=[x, x.grad, self.train_rate])\n",
            "inputs=[x, x.grad, self.train_rate])\n" + " " * 20 + "self.tape.zero()\n",
        )
        assert after != before
        self.assertCodemod(before, after, line=6)

    def test_arrays_another_class_sets_fall_back_to_the_consumer(self) -> None:
        before = """
            class Example:
                def forward_backward(self):
                    with self.tape:
                        self.forward()
                    self.tape.backward()

                def step(self):
                    self.forward_backward()
                    self.optimizer.step([self.rollouts.trajectories.grad.flatten()])
                    self.frame += 1
        """
        after = before.replace(".grad.flatten()])\n", ".grad.flatten()])\n" + " " * 20 + "self.tape.zero()\n")
        assert after != before
        self.assertCodemod(before, after, line=5, arrays=["self.trajectories", "self.trajectories"])

    def test_named_grads_already_zeroed_are_not_zeroed_again(self) -> None:
        before = """
            def fit(w):
                with wp.Tape() as tape:
                    forward(w)
                w.grad.zero_()
                tape.backward(loss)
        """
        self.assertCodemod(before, before, line=5, arrays=["w"], expected_skip=True)

    def test_not_in_loop_is_skipped(self) -> None:
        self.assertCodemod("tape.backward(loss)\n", "tape.backward(loss)\n", line=1, expected_skip=True)

    def test_rerecorded_tape_in_a_loop_resets_instead_of_zeroing(self) -> None:
        before = """
            for it in range(iters):
                with tape:
                    forward()
                tape.backward(loss)
                step(params, params.grad)
                tape.zero()
        """
        self.assertCodemod(before, before.replace("tape.zero()", "tape.reset()"), line=4, rerecorded=True)

    def test_rerecorded_tape_in_a_method_resets_before_recording(self) -> None:
        before = """
            class Trainer:
                def forward_backward(self):
                    self.loss.zero_()
                    with self.tape:
                        forward(self.loss)
                    self.tape.backward(self.loss)
        """
        after = """
            class Trainer:
                def forward_backward(self):
                    self.loss.zero_()
                    self.tape.reset()
                    with self.tape:
                        forward(self.loss)
                    self.tape.backward(self.loss)
        """
        self.assertCodemod(before, after, line=6, rerecorded=True)

    def test_rerecorded_tape_recorded_in_two_blocks_is_skipped(self) -> None:
        before = """
            def forward_backward(self):
                with self.tape:
                    forward(self.loss)
                with self.tape:
                    more(self.loss)
                self.tape.backward(self.loss)
        """
        self.assertCodemod(before, before, line=6, rerecorded=True, expected_skip=True)


class TestMoveAcrossBackward(CodemodTest):
    TRANSFORM = MoveAcrossBackward

    def test_the_statements_using_a_moved_read_go_along(self) -> None:
        before = """
            with tape:
                wp.launch(k, dim=n, inputs=[x], outputs=[loss])
            self.g = x.grad.numpy()
            norm = float(np.linalg.norm(self.g))
            print(norm)
            tape.backward(loss)
        """
        after = """
            with tape:
                wp.launch(k, dim=n, inputs=[x], outputs=[loss])
            tape.backward(loss)
            self.g = x.grad.numpy()
            norm = float(np.linalg.norm(self.g))
            print(norm)
        """
        self.assertCodemod(before, after, line=3)

    def test_the_step_goes_after_a_clip_of_the_gradient(self) -> None:
        """Blind corpus 4's tile_softplus: ``opt.step`` before the backward; after it, ``clip_gradients`` rewrites
        the gradients (``grad_write_lines``): the step goes after the clip, where the gradient is final."""
        before = """
            opt.step([w.grad])
            tape.backward(loss)
            print(loss)
            clip_gradients(params, 2.0)
            tape.reset()
        """
        after = """
            tape.backward(loss)
            print(loss)
            clip_gradients(params, 2.0)
            opt.step([w.grad])
            tape.reset()
        """
        self.assertCodemod(before, after, line=1, grad_write_lines=[4])

    def test_the_backward_moves_before_the_yield(self) -> None:
        """Blind corpus 4's peg_board: the generator yields (its caller steps the optimizer) before its backward."""
        before = """
            def optimize(bufs, iters):
                for it in range(iters):
                    tape = wp.Tape()
                    with tape:
                        rollout(bufs)
                    yield it, float(bufs.loss.numpy()[0])
                    tape.backward(bufs.loss)
                    tape.zero()
        """
        after = """
            def optimize(bufs, iters):
                for it in range(iters):
                    tape = wp.Tape()
                    with tape:
                        rollout(bufs)
                    tape.backward(bufs.loss)
                    yield it, float(bufs.loss.numpy()[0])
                    tape.zero()
        """
        self.assertCodemod(before, after, line=6, yield_line=6, backward_line=7)

    def test_a_tape_block_holding_only_the_step_goes(self) -> None:
        """Blind corpus 4's orbit_burn: ``with tape: thrust.assign(... thrust.grad ...)`` before the backward."""
        before = """
            objective(model, bufs, thrust, tape)
            with tape:
                thrust.assign(thrust.numpy() - lr * thrust.grad.numpy())
            tape.backward(loss)
            report(loss)
        """
        after = """
            objective(model, bufs, thrust, tape)
            tape.backward(loss)
            thrust.assign(thrust.numpy() - lr * thrust.grad.numpy())
            report(loss)
        """
        self.assertCodemod(before, after, line=3)

    def test_an_update_loop_over_the_parameters_moves_as_one(self) -> None:
        """The blind corpus's oscillator_id: the clipped SGD over ``params.values()`` before the backward."""
        before = """
            for p in params.values():
                wp.launch(sgd, dim=n, inputs=[p, p.grad, lr])
            tape.backward(loss)
            tape.zero()
        """
        after = """
            tape.backward(loss)
            for p in params.values():
                wp.launch(sgd, dim=n, inputs=[p, p.grad, lr])
            tape.zero()
        """
        self.assertCodemod(before, after, line=2)

    def test_a_user_that_launches_does_not_move(self) -> None:
        before = """
            g = x.grad
            wp.launch(step, dim=n, inputs=[p, g])
            tape.backward(loss)
        """
        self.assertCodemod(before, before, line=1, expected_skip=True)

    def test_a_continuation_line_maps_to_its_statement(self) -> None:
        before = """
            with tape:
                wp.launch(k, dim=n, inputs=[x], outputs=[loss])
            log(
                x.grad.numpy(),
            )
            tape.backward(loss)
        """
        after = """
            with tape:
                wp.launch(k, dim=n, inputs=[x], outputs=[loss])
            tape.backward(loss)
            log(
                x.grad.numpy(),
            )
        """
        self.assertCodemod(before, after, line=4)

    def test_the_zero_moves_after_a_read_that_cannot_move_before_it(self) -> None:
        before = """
            tape.backward(loss)
            tape.zero()
            scale = lr / n
            step(p, p.grad.numpy() * scale)
        """
        after = """
            tape.backward(loss)
            scale = lr / n
            step(p, p.grad.numpy() * scale)
            tape.zero()
        """
        self.assertCodemod(before, after, line=4)

    def test_out_of_tape_scope(self) -> None:
        before = """
            with wp.Tape() as tape:
                wp.launch(loss_kernel, dim=n, inputs=[x], outputs=[loss])
                # reset the state
                state.zero_()
            tape.backward(loss)
            print(loss)
        """
        after = """
            with wp.Tape() as tape:
                wp.launch(loss_kernel, dim=n, inputs=[x], outputs=[loss])
            tape.backward(loss)
            # reset the state
            state.zero_()
            print(loss)
        """
        self.assertCodemod(before, after, line=4)

    def test_write_before_backward(self) -> None:
        before = """
            with tape:
                wp.launch(k, dim=n, inputs=[x], outputs=[loss])
            wp.launch(reset, dim=n, outputs=[x])
            tape.backward(loss=loss)
        """
        after = """
            with tape:
                wp.launch(k, dim=n, inputs=[x], outputs=[loss])
            tape.backward(loss=loss)
            wp.launch(reset, dim=n, outputs=[x])
        """
        self.assertCodemod(before, after, line=3, tape="tape")

    def test_grad_read_after_zero(self) -> None:
        before = """
            tape.backward(loss)
            tape.zero()
            g = x.grad.numpy()
        """
        after = """
            tape.backward(loss)
            g = x.grad.numpy()
            tape.zero()
        """
        self.assertCodemod(before, after, line=3)

    def test_dependency_is_skipped(self) -> None:
        code = """
            with tape:
                wp.launch(k, dim=n, inputs=[x], outputs=[y])
                total = y
                wp.launch(loss_k, dim=n, inputs=[total], outputs=[loss])
            tape.backward(loss)
        """
        self.assertCodemod(code, code, line=3, expected_skip=True)

    def test_other_tape_is_skipped(self) -> None:
        code = """
            x.zero_()
            tape.backward(loss)
        """
        self.assertCodemod(code, code, line=1, tape="other", expected_skip=True)


class TestWriteIntoCopy(CodemodTest):
    """WF303 with the backward in another method (the blind corpus's spring_chain: a bookkeeping launch
    reuses the tape's ``self.tip`` as its output after the tape block)."""

    TRANSFORM = MoveAcrossBackward
    TRAINER = """
        import warp as wp

        class Trainer:
            def __init__(self):
                self.tip = wp.zeros(1, dtype=float, requires_grad=True)
                {extra}

            def forward(self):
                with self.tape:
                    wp.launch(gather, dim=1, inputs=[self.x], outputs=[self.tip])
                    wp.launch(loss_kernel, dim=1, inputs=[self.tip], outputs=[self.loss])
                wp.launch(gather, dim=1, inputs=[self.x0], outputs=[self.tip])

            def backward(self):
                self.tape.backward(self.loss)
    """

    @staticmethod
    def _write_line(code: str) -> int:
        """The line of the bookkeeping launch after the tape block (the finding's line)."""
        lines = textwrap.dedent(code).strip().splitlines()  # as CodemodTest lays the fixture out
        return next(i for i, text in enumerate(lines, 1) if "wp.launch(gather" in text and "outputs=[self.tip]" in text
                    and not text.startswith(" " * 12))

    def test_the_write_goes_into_a_copy(self) -> None:
        before = self.TRAINER.replace("{extra}", "self.x = None")
        after = before.replace("        wp.launch(gather, dim=1, inputs=[self.x0]",
                               "        self.tip = wp.clone(self.tip)\n                wp.launch(gather, dim=1, inputs=[self.x0]")
        self.assertCodemod(before, after, line=self._write_line(before), written="self.tip", tape="self.tape")

    def test_an_array_an_optimizer_holds_gets_no_copy(self) -> None:
        before = self.TRAINER.replace("{extra}", "self.opt = warp.optim.SGD([self.tip], lr=0.1)")
        self.assertCodemod(before, before, line=self._write_line(before), written="self.tip", tape="self.tape",
                           expected_skip=True)

    def test_an_array_handed_on_outside_the_class_gets_no_copy(self) -> None:
        before = self.TRAINER.replace("{extra}", "self.x = None") + (
            "\n\n        trainer = Trainer()\n        opt = SGD([trainer.tip])\n")
        self.assertCodemod(before, before, line=self._write_line(before), written="self.tip", tape="self.tape",
                           expected_skip=True)

    def test_an_update_that_reads_what_it_writes_gets_no_copy(self) -> None:
        before = self.TRAINER.replace("{extra}", "self.x = None").replace(
            "inputs=[self.x0], outputs=[self.tip]", "inputs=[self.tip], outputs=[self.tip]")
        self.assertCodemod(before, before, line=self._write_line(before), written="self.tip", tape="self.tape",
                           expected_skip=True)


class TestFreshOutputAtLaunch(CodemodTest):
    TRANSFORM = FreshOutput

    def test_modulo_indexed_buffers(self) -> None:
        before = """
            for i in range(steps):
                wp.launch(step, dim=n, inputs=[states[i % 2]], outputs=[states[(i + 1) % 2]])
        """
        after = """
            for i in range(steps):
                states[(i + 1) % 2] = wp.empty_like(states[(i + 1) % 2])
                wp.launch(step, dim=n, inputs=[states[i % 2]], outputs=[states[(i + 1) % 2]])
        """
        self.assertCodemod(before, after, line=2, arg="states[(i + 1) % 2]")

    def test_finding_quotes_the_slot_otherwise(self) -> None:
        """The finding's data writes ``b['q'][...]`` (as ``ast.unparse`` gives it), the source ``b["q"][...]``."""
        before = """
            for t in range(steps):
                wp.launch(step, dim=n, inputs=[b["q"][t % 2]], outputs=[b["q"][(t + 1) % 2]])
        """
        after = """
            for t in range(steps):
                b["q"][(t + 1) % 2] = wp.empty_like(b["q"][(t + 1) % 2])
                wp.launch(step, dim=n, inputs=[b["q"][t % 2]], outputs=[b["q"][(t + 1) % 2]])
        """
        self.assertCodemod(before, after, line=2, arg="b['q'][(t + 1) % 2]")


class TestCopyKernel(CodemodTest):
    TRANSFORM = CopyKernel

    def test_clone_becomes_allocation_and_launch(self) -> None:
        before = """
            import warp as wp


            def step(x):
                with tape:
                    y = wp.clone(x)
                    wp.launch(k, dim=4, inputs=[x], outputs=[z])
        """
        after = """
            from typing import Any

            import warp as wp


            @wp.kernel
            def copy_array(src: wp.array(dtype=Any), dst: wp.array(dtype=Any)):
                i = wp.tid()
                dst[i] = src[i]


            def step(x):
                with tape:
                    y = wp.empty_like(x)
                    wp.launch(copy_array, dim=x.shape, inputs=[x], outputs=[y])
                    wp.launch(k, dim=4, inputs=[x], outputs=[z])
        """
        self.assertCodemod(before, after, line=6)

    def test_assign_with_existing_kernel(self) -> None:
        before = """
            @wp.kernel
            def copy_array(src: wp.array(dtype=Any), dst: wp.array(dtype=Any)):
                i = wp.tid()
                dst[i] = src[i]
            state.q.assign(q_new)
        """
        after = """
            @wp.kernel
            def copy_array(src: wp.array(dtype=Any), dst: wp.array(dtype=Any)):
                i = wp.tid()
                dst[i] = src[i]
            wp.launch(copy_array, dim=q_new.shape, inputs=[q_new], outputs=[state.q])
        """
        self.assertCodemod(before, after, line=5)
