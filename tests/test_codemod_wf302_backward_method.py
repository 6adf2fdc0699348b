"""WF302 with the backward in another method of the class (blind corpus 2's acrobot_hold: an Adam step in
``forward()``'s ``with self.tape:`` block, ``self.tape.backward`` in ``backward()``, the loop in ``train()``
calling one then the other): the step goes after each call of ``backward()``. Refused, with the reason,
where that would not run it exactly as often, or would cross code that does something."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.codemod import CodemodContext, SkipFile

from codemods.wf302_after_backward import MoveAcrossBackward

TRAINER = textwrap.dedent('''\
    import warp as wp


    class Trainer:
        def __init__(self):
            self.tape = wp.Tape()

        def forward(self):
            self.tape.reset()
            with self.tape:
                wp.launch(cost, 4, inputs=[self.x, self.gain], outputs=[self.loss])
                self.update()
            return self.loss

        def backward(self):
            self.tape.backward(self.loss)

        def update(self):
            self.opt.step([self.gain.grad])

        def train(self, iterations):
            for it in range(iterations):
                self.forward()
                self.backward()
                print(self.loss.numpy()[0])
    ''')


def rewrite(code: str, marker: str = "self.update()\n") -> str:
    line = code[: code.index(marker)].count("\n") + 1
    context = CodemodContext(filename="main.py", scratch={})
    return MoveAcrossBackward(context, line=line, tape="self.tape").transform_module(cst.parse_module(code)).code


def refusal(code: str, marker: str = "self.update()\n") -> str:
    with pytest.raises(SkipFile) as caught:
        rewrite(code, marker)
    return str(caught.value)


def test_the_step_goes_after_the_backward_method_called_by_the_same_loop() -> None:
    assert rewrite(TRAINER) == TRAINER.replace("            self.update()\n", "").replace(
        "            self.backward()\n", "            self.backward()\n            self.update()\n")


def test_on_an_instance_the_loop_holds_self_becomes_the_instance() -> None:
    code = TRAINER.replace('''
    def train(self, iterations):
        for it in range(iterations):
            self.forward()
            self.backward()
            print(self.loss.numpy()[0])
''', '''

trainer = Trainer()
for it in range(3):
    loss = trainer.forward()
    trainer.backward()
''').replace("            self.update()\n", "            self.opt.step([self.gain.grad])  # descend\n")
    after = rewrite(code, "self.opt.step(")
    assert "    trainer.backward()\n    trainer.opt.step([trainer.gain.grad])  # descend\n" in after
    assert "        with self.tape:\n            wp.launch(cost, 4, inputs=[self.x, self.gain], outputs=[self.loss])\n" \
        "        return self.loss\n" in after


@pytest.mark.parametrize(("change", "why"), [
    (("    def train(", "    def evaluate(self):\n        self.forward()\n\n    def train("),
     "the call of forward() at line 22 is not followed by self.backward() in the same block"),
    (("            self.forward()\n", "            self.forward()\n            self.rollout()\n"),
     "line 24 runs code between the statement and the backward of backward() that the move would put before it"),
    (("        self.tape.backward(self.loss)\n", "        self.tape.backward(self.loss)\n"
      "        self.tape.zero()\n"),
     "that the move would put before it"),
    (("            self.update()\n        return self.loss\n", "            self.update()\n"
      "            wp.launch(cost, 4, inputs=[self.x, self.gain], outputs=[self.loss])\n        return self.loss\n"),
     "that the move would put before it"),
    (("        with self.tape:\n", "        if self.recording:\n            return None\n"
      "        with self.tape:\n"), "forward() may return before its end"),
    (("            self.forward()\n", "            callback = self.forward\n            callback()\n"),
     "forward is used at line 23 other than by a call"),
    (("        self.tape.backward(self.loss)\n", "        if self.ready:\n"
      "            self.tape.backward(self.loss)\n"), "0 other method(s) of Trainer run self.tape.backward(...)"),
])
def test_where_the_move_would_change_what_runs_it_is_refused(change: tuple[str, str], why: str) -> None:
    code = TRAINER.replace(*change)
    assert code != TRAINER
    message = refusal(code)
    assert message.startswith(f"line {code[: code.index('self.update()')].count(chr(10)) + 1}: no `tape.backward"), \
        message
    assert why in message, message


def test_a_statement_using_a_local_of_the_recording_method_is_refused() -> None:
    code = TRAINER.replace("            self.update()\n", "            grads = [self.gain.grad]\n"
                           "            self.opt.step(grads)\n")
    assert "the statement uses grads, local to forward()" in refusal(code, "self.opt.step(grads)")
