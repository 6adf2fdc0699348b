"""An optimizer step a training loop calls before the call that runs the backward (blind corpus 3's rope_throw):
the finding is at the loop's call, and the fix moves that call after the backward's and the loop's gradient
readers (``warpfix.model.call_order``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpfix.apply import Selection, plan_fixes
from warpfix.engine import check_sources

PROGRAM = '''
import warp as wp


@wp.kernel
def predict(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = w[0] * x[i] * x[i]


@wp.kernel
def mse(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, (y[i] - 1.0) * (y[i] - 1.0))


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    w[0] = w[0] - lr * g[0]


class Trainer:
    def __init__(self):
        self.x = wp.full(8, 0.5, dtype=float)
        self.y = wp.zeros(8, dtype=float, requires_grad=True)
        self.w = wp.ones(1, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = None

    def forward(self):
        self.loss.zero_()
        self.tape = wp.Tape()
        with self.tape:
            wp.launch(predict, dim=8, inputs=[self.x, self.w], outputs=[self.y])
            wp.launch(mse, dim=8, inputs=[self.y], outputs=[self.loss])

    def backward(self):
        self.tape.backward(self.loss)

    def apply(self):
        wp.launch(sgd, dim=1, inputs=[self.w, self.w.grad, 0.1])
        self.tape.zero()


def train(trainer, n, callback):
    for it in range(n):
        trainer.forward()
{order}


def report(it, trainer):
    print(it, trainer.w.grad.numpy())


train(Trainer(), 3, report)
'''
RIGHT = "        trainer.backward()\n        callback(it, trainer)\n        trainer.apply()"
EARLY = "        trainer.apply()\n        trainer.backward()\n        callback(it, trainer)"


def test_the_step_called_before_the_backward_is_reported_at_that_call() -> None:
    text = PROGRAM.format(order=EARLY)
    found = {(f.rule, f.line) for f in check_sources({"main.py": text}).findings if f.rule in ("WF303", "WF304")}
    line = text.splitlines().index("        trainer.apply()") + 1
    assert found == {("WF303", line), ("WF304", line)}
    assert [f for f in check_sources({"main.py": PROGRAM.format(order=RIGHT)}).findings
            if f.rule in ("WF303", "WF304")] == []


@pytest.mark.parametrize("rule", ["WF303", "WF304"])
def test_the_call_moves_after_the_backward_and_the_loop_s_gradient_readers(
    rule: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "main.py").write_text(PROGRAM.format(order=EARLY), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = plan_fixes(["."], selection=Selection(select=[rule], use_cache=False))
    assert next(iter(result.changed.values())) == PROGRAM.format(order=RIGHT)
    assert "moved after the call that runs the backward" in result.edits[0].reason
