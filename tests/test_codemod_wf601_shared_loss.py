"""WF601 hoist, two shapes of the held-out corpus 2 (acrobot_hold, attitude_slew): a tape made per window
by ``with wp.Tape() as tape:``, and a loss the windows share (zeroed once before the window loop, every
window adding into it), whose one backward after the loop is the episode objective. The refusals of that
second shape say where the windows do something else to the loss."""

from __future__ import annotations

import re
import textwrap

import libcst as cst
import pytest
from libcst.codemod import CodemodContext, SkipFile

from codemods.wf601_hoist import HoistWindowTape
from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.fixes import compute_edits

KERNELS = '''
import warp as wp


@wp.kernel
def step(q: wp.array(dtype=float), gain: wp.array(dtype=float), q_out: wp.array(dtype=float)):
    i = wp.tid()
    q_out[i] = q[i] + gain[0] * q[i]


@wp.kernel
def cost(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])

'''

TRAINER = KERNELS + '''
class Trainer:
    def __init__(self, steps):
        self.steps = steps
        self.q = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(steps + 1)]
        self.gain = wp.array([0.1], dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def reset(self):
        self.q[0].fill_(1.0)
        self.loss.zero_()

    def advance(self, t):
        wp.launch(step, 4, inputs=[self.q[t], self.gain], outputs=[self.q[t + 1]])
        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])

    def forward(self):
        self.reset()
        self.gain.grad.zero_()
        for t in range(self.steps):
            with wp.Tape() as tape:
                self.advance(t)
            # one backward per step keeps the tape short
            tape.backward(self.loss)
        return self.loss
'''

TRAINER_FIXED = KERNELS + '''
class Trainer:
    def __init__(self, steps):
        self.steps = steps
        self.q = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(steps + 1)]
        self.gain = wp.array([0.1], dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def reset(self):
        self.q[0].fill_(1.0)
        self.loss.zero_()

    def advance(self, t):
        wp.launch(step, 4, inputs=[self.q[t], self.gain], outputs=[self.q[t + 1]])
        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])

    def forward(self):
        self.reset()
        self.gain.grad.zero_()
        tape = wp.Tape()
        with tape:
            for t in range(self.steps):
                self.advance(t)
        tape.backward(self.loss)
        return self.loss
'''

# the loss reached through another object's attribute (`loss = planner.loss`), the tape made by an assignment
PLANNER = KERNELS + '''
class Planner:
    def __init__(self):
        self.q = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(9)]
        self.gain = wp.array([0.1], dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def simulate_step(self, t):
        wp.launch(step, 4, inputs=[self.q[t], self.gain], outputs=[self.q[t + 1]])
        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])


def run(planner, iterations):
    for it in range(iterations):
        loss = planner.loss
        loss.zero_()
        planner.gain.grad.zero_()
        for t in range(8):
            tape = wp.Tape()
            with tape:
                planner.simulate_step(t)
            tape.backward(loss)
        print(loss.numpy()[0])
        planner.gain.assign(planner.gain.numpy() - 0.1 * planner.gain.grad.numpy())
        tape.zero()
'''


def rewrite(code: str, marker: str, sources: dict[str, str] | None = None) -> str:
    """The hoist at the backward line ``marker`` points at (the line holding it)."""
    line = code[: code.index(marker)].count("\n") + 1
    context = CodemodContext(filename="main.py", scratch={"sources": sources or {}})
    return HoistWindowTape(context, line=line).transform_module(cst.parse_module(code)).code


def refusal(code: str, marker: str, sources: dict[str, str] | None = None) -> str:
    with pytest.raises(SkipFile) as caught:
        rewrite(code, marker, sources)
    return str(caught.value)


# -- the tape made by `with wp.Tape() as tape:` ----------------------------------------------------
def test_a_shared_loss_and_a_with_made_tape_hoist_to_one_backward_of_the_loss() -> None:
    """acrobot_hold's shape: the loss adds every step's cost, the backward after the loop is the episode's
    (no per-window loss, no `<loss>_total`); the comment about the per-step backward goes with it."""
    assert rewrite(TRAINER, "tape.backward(self.loss)") == TRAINER_FIXED


def test_the_shared_loss_is_followed_through_an_alias_and_another_objects_methods() -> None:
    """attitude_slew's shape: ``loss = planner.loss`` in ``run()``, the cost launched in ``Planner``."""
    after = rewrite(PLANNER, "tape.backward(loss)")
    assert after == PLANNER.replace(
        "        for t in range(8):\n            tape = wp.Tape()\n            with tape:\n"
        "                planner.simulate_step(t)\n            tape.backward(loss)\n",
        "        tape = wp.Tape()\n        with tape:\n            for t in range(8):\n"
        "                planner.simulate_step(t)\n        tape.backward(loss)\n",
    )


def test_a_with_made_attribute_tape_with_a_per_window_loss() -> None:
    """``with wp.Tape() as self.tape:`` and a loss allocated per window: the creation becomes a statement
    before the loop and the per-window losses are summed on the tape as before."""
    code = KERNELS + textwrap.dedent('''
        class Trainer:
            def episode(self):
                for frame in range(4):
                    loss = wp.zeros(1, dtype=float, requires_grad=True)
                    with wp.Tape() as self.tape:
                        wp.launch(step, 4, inputs=[self.q[frame], self.gain], outputs=[self.q[frame + 1]])
                        wp.launch(cost, 4, inputs=[self.q[frame + 1]], outputs=[loss])
                    self.tape.backward(loss)
                return self.gain.grad
    ''')
    after = rewrite(code, "self.tape.backward(loss)")
    assert "        self.tape = wp.Tape()\n        with self.tape:\n            for frame in range(4):\n" in after
    assert "wp.launch(accumulate_loss, dim=1, inputs=[loss], outputs=[loss_total])" in after
    assert "        self.tape.backward(loss_total)\n" in after
    assert "as self.tape" not in after


def test_the_fix_through_the_command_and_its_summary() -> None:
    finding = Finding(rule="WF601", name="per-window-tape", severity=Severity.ERROR,
                      span=Span("main.py", TRAINER.count("\n", 0, TRAINER.index("tape.backward(self.loss)")) + 1, 13,
                                0, 0),
                      message="m", fix=Fix(FixSafety.SAFE, "hoist"),
                      data={"tape": "tape", "loss": "self.loss", "grad_reads": [], "tape_zero_lines": []})
    result = compute_edits({"main.py": TRAINER}, [finding])
    assert result.skipped == []
    assert result.new_sources == {"main.py": TRAINER_FIXED}
    note = result.notes[id(finding)]
    assert "the loss self.loss sums every window's terms (cost (line" in note


def test_a_kernel_of_another_file_adds_into_the_loss() -> None:
    sim = KERNELS
    main = TRAINER.replace(KERNELS, "\nimport warp as wp\n\nimport sim\n\n").replace(
        "wp.launch(step,", "wp.launch(sim.step,").replace("wp.launch(cost,", "wp.launch(sim.cost,")
    after = rewrite(main, "tape.backward(self.loss)", {"main.py": main, "sim.py": sim})
    assert "        tape.backward(self.loss)\n        return self.loss\n" in after


# -- what the windows must not do to a shared loss ---------------------------------------------------
@pytest.mark.parametrize(("change", "why"), [
    (("wp.atomic_add(loss, 0, q[i] * q[i])", "loss[0] = q[i] * q[i]"),
     "kernel cost (line {cost}), launched at line {launch} (Trainer.advance()), stores into it with `=` "
     "(parameter loss) instead of only adding into it with wp.atomic_add or +="),
    (("        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])\n",
      "        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])\n        self.loss.zero_()\n"),
     "self.loss.zero_() at line {zero} (Trainer.advance()) resets it in every window"),
    (("        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])\n",
      "        self.loss = wp.zeros(1, dtype=float, requires_grad=True)\n"
      "        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])\n"),
     "self.loss is bound anew at line {bound} (Trainer.advance()): every window gets its own loss array there"),
    (("        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])\n",
      "        external.cost(self.q[t + 1], self.loss)\n"),
     "it is handed to external.cost() at line {external} (Trainer.advance()), whose code is not in the project"),
    (("wp.launch(cost, 4,", "wp.launch(other_cost, 4,"),
     "kernel other_cost, launched at line {launch} (Trainer.advance()), is not defined in the project"),
    (("        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])\n",
      "        wp.copy(self.loss, self.q[t + 1])\n"),
     "wp.copy at line {copy} (Trainer.advance()) overwrites self.loss"),
    (("        wp.launch(cost, 4, inputs=[self.q[t + 1]], outputs=[self.loss])\n", ""),
     "no launch of the window loop adds into self.loss"),
])
def test_a_shared_loss_the_windows_do_not_only_add_into_is_refused(change: tuple[str, str], why: str) -> None:
    code = TRAINER.replace(*change)
    assert code != TRAINER
    message = refusal(code, "tape.backward(self.loss)")
    assert message.startswith(
        f"line {line_of(code, 'tape.backward(self.loss)')}: the loss self.loss is neither allocated in the window "
        "loop nor zeroed there with self.loss.zero_(), so every window must only add into it, but "
    ), message
    advance = code.index("def advance")
    places = {"cost": "def cost", "launch": "4, inputs=[self.q[t + 1]]", "zero": "self.loss.zero_()",
              "bound": "self.loss = wp.zeros", "external": "external.cost", "copy": "wp.copy(self.loss"}
    expected = why.format(**{k: line_of(code, v, advance) for k, v in places.items() if k != "cost"},
                          cost=line_of(code, "def cost"))
    assert expected in message, message


def line_of(code: str, text: str, start: int = 0) -> int:
    """The line of the first ``text`` in ``code`` from ``start`` (0 when there is none)."""
    index = code.find(text, start)
    return code[:index].count("\n") + 1 if index >= 0 else 0


def test_a_with_item_that_makes_something_else_is_refused() -> None:
    code = TRAINER.replace("with wp.Tape() as tape:", "with make_tape() as tape:")
    assert "binds tape to something other than a new wp.Tape()" in refusal(code, "tape.backward(self.loss)")


def test_a_tape_reused_across_windows_is_still_refused() -> None:
    code = TRAINER.replace("            with wp.Tape() as tape:\n", "            with tape:\n")
    assert re.search(r"tape is not created in the window loop \(reused tape\)", refusal(code, "tape.backward"))


# -- the truncation shape (one backward after the loop) with `with wp.Tape() as tape:` ------------------
PASSES = textwrap.dedent(
    """\
    import warp as wp


    class Example:
        def forward_backward(self):
            self.tape = wp.Tape()
            for frame in range(self.frames):
                with wp.Tape() as self.tape:
                    self.simulate(frame)
            with self.tape:
                wp.launch(loss_kernel, dim=1, inputs=[self.states[-1].q], outputs=[self.loss])
            self.tape.backward(self.loss)
    """
)


def one_tape(code: str) -> str:
    from codemods.wf601_frame_tape import OneTapeOverPasses

    line = code[: code.index("            with wp.Tape() as")].count("\n") + 1
    context = CodemodContext(filename="main.py", scratch={})
    return OneTapeOverPasses(context, line=line, tape="self.tape", loop={"line": line - 1}).transform_module(
        cst.parse_module(code)).code


def test_a_pass_made_tape_re_enters_the_tape_made_before_the_loop() -> None:
    assert one_tape(PASSES) == PASSES.replace("with wp.Tape() as self.tape:", "with self.tape:")


def test_a_pass_made_tape_is_made_before_the_loop_when_its_block_makes_none() -> None:
    code = PASSES.replace("        self.tape = wp.Tape()\n", "")
    assert one_tape(code) == code.replace(
        "        for frame in range(self.frames):\n            with wp.Tape() as self.tape:\n",
        "        self.tape = wp.Tape()\n        for frame in range(self.frames):\n            with self.tape:\n",
    )


def test_printing_the_shared_loss_in_a_window_is_a_read() -> None:
    code = TRAINER.replace("                self.advance(t)\n", "                self.advance(t)\n                print(self.loss)\n")
    assert "        tape.backward(self.loss)\n" in rewrite(code, "tape.backward(self.loss)")


# -- a window's own loss, added into a running total on the tape ---------------------------------------
SEGMENTS = KERNELS + '''
@wp.kernel
def add_into(part: wp.array(dtype=float), total: wp.array(dtype=float)):
    wp.atomic_add(total, 0, part[0])


class Inversion:
    def __init__(self):
        self.q = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(5)]
        self.gain = wp.array([0.1], dtype=float, requires_grad=True)
        self.parts = [wp.zeros(1, dtype=float, requires_grad=True) for _ in range(4)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def segment_loss(self, k):
        wp.launch(cost, 4, inputs=[self.q[k + 1]], outputs=[self.parts[k]])
        return self.parts[k]

    def iterate(self):
        self.loss.zero_()
        for k in range(4):
            tape = wp.Tape()
            with tape:
                wp.launch(step, 4, inputs=[self.q[k], self.gain], outputs=[self.q[k + 1]])
                part = self.segment_loss(k)
                wp.launch(add_into, dim=1, inputs=[part], outputs=[self.loss])
            tape.backward(part)
        return self.loss
'''


def test_a_window_loss_added_into_a_running_total_hoists_to_one_backward_of_the_total() -> None:
    """Blind corpus 3's wave_sensors: each segment backwards its own ``part`` (an array a method returns, not an
    allocation the hoist could sum), and a launch on the same tape adds ``part`` into ``self.loss``, zeroed once
    before the loop: that total is the episode's loss, and the one backward after the loop differentiates it."""
    after = rewrite(SEGMENTS, "tape.backward(part)")
    assert after == SEGMENTS.replace(
        "        for k in range(4):\n            tape = wp.Tape()\n            with tape:\n",
        "        tape = wp.Tape()\n        with tape:\n            for k in range(4):\n",
    ).replace("            tape.backward(part)\n", "        tape.backward(self.loss)\n")
    # a total the windows also reset is no running sum: the refusal is the per-window loss's
    reset = SEGMENTS.replace("outputs=[self.loss])\n            tape.backward",
                             "outputs=[self.loss])\n                self.loss.zero_()\n            tape.backward")
    assert "part is not allocated with wp.zeros in the window loop" in refusal(reset, "tape.backward(part)")


SET_UP_ONCE = SEGMENTS.replace(
    "                wp.launch(step, 4, inputs=[self.q[k], self.gain], outputs=[self.q[k + 1]])\n",
    "                if k == 0:\n"
    "                    wp.launch(step, 4, inputs=[self.q[0], self.gain], outputs=[self.q[1]])\n"
    "                wp.launch(step, 4, inputs=[self.q[k + 1], self.q[k + 1]], outputs=[self.q[k + 2]])\n",
).replace("range(5)", "range(6)").replace("inputs=[self.q[k + 1]], outputs=[self.parts[k]]",
                                          "inputs=[self.q[k + 2]], outputs=[self.parts[k]]") + '''

inv = Inversion()
for it in range(3):
    inv.iterate()
    inv.gain.assign(inv.gain.numpy() - 0.1 * inv.gain.grad.numpy())
'''


def test_a_parameter_only_the_first_window_reads_is_still_summed_over_truncated_windows() -> None:
    """The parameter enters in a set-up under ``if k == 0:`` (the initial displacement); the later windows reach
    it only through the state the first carries over, which their per-window backwards treat as constant. The
    first window's own writes of that state are the episode's initial state, not an intermediate."""
    from warpfix.engine import check_sources

    findings = check_sources({"main.py": SET_UP_ONCE}, select=["WF601"]).findings
    assert [(f.rule, f.line) for f in findings] == [("WF601", SET_UP_ONCE.splitlines().index(
        "            tape.backward(part)") + 1)]
    assert "gradients of `self.gain` are summed" in findings[0].message


CLOSURE_WINDOWS = KERNELS + '''
import contextlib


@contextlib.contextmanager
def recording():
    tape = wp.Tape()
    with tape:
        yield tape


def make_loss_fn(steps):
    q = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(steps + 1)]
    err = wp.zeros(1, dtype=float, requires_grad=True)
    seed = wp.ones(1, dtype=float)

    def simulate_window(w, gain):
        wp.launch(step, 4, inputs=[q[w], gain], outputs=[q[w + 1]])
        wp.launch(cost, 4, inputs=[q[w + 1]], outputs=[err])

    def loss_fn(gain):
        err.zero_()
        for w in range(steps):
            with recording() as tape:
                simulate_window(w, gain)
            tape.backward(grads={err: seed})
        return tape

    return loss_fn
'''


def test_a_context_manager_tape_and_a_seeded_backward_hoist_around_a_closure() -> None:
    """Blind corpus 3's glider_drop: the window's tape comes from a project ``@contextmanager`` that yields a new
    tape it records on, the backward is seeded (``grads={err: seed}``), and the launches adding into ``err`` are
    in a closure beside the loss function: the loop moves into one such block, the same seeded backward after it."""
    after = rewrite(CLOSURE_WINDOWS, "tape.backward(grads={err: seed})")
    assert after == CLOSURE_WINDOWS.replace(
        "        for w in range(steps):\n            with recording() as tape:\n                simulate_window(w, gain)\n"
        "            tape.backward(grads={err: seed})\n",
        "        with recording() as tape:\n            for w in range(steps):\n                simulate_window(w, gain)\n"
        "        tape.backward(grads={err: seed})\n",
    )
    # a context manager that does something else than make and record a tape is not one
    other = CLOSURE_WINDOWS.replace("    with tape:\n        yield tape\n", "    yield tape\n")
    assert "binds tape to something other than a new wp.Tape()" in refusal(other, "tape.backward(grads=")
