"""Buggy (WF301), in a shape the static model does not follow: the optimizer step runs through a
callback a library calls (here ``map``), and no ``tape.zero()`` clears the gradient it consumed, so
the next backward adds to it. `warpfix check` reports nothing; `warpfix verify` sees WF903."""

import numpy as np
import warp as wp
from common_kernels import sgd, sq_loss, step

N = 16


class Trainer:
    def __init__(self):
        rng = np.random.default_rng(2)
        self.k = wp.array(rng.uniform(1.0, 2.0, N).astype(np.float32), requires_grad=True)
        self.target = wp.array(rng.uniform(-0.2, 0.2, N).astype(np.float32))
        self.tape = wp.Tape()

    def train_step(self, it):
        x = wp.array(np.linspace(0.5, 1.0, N).astype(np.float32), requires_grad=True)
        v = wp.zeros(N, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()
        with self.tape:
            for _ in range(4):
                x2, v2 = wp.empty_like(x), wp.empty_like(v)
                wp.launch(step, dim=N, inputs=[x, v, self.k], outputs=[x2, v2])
                x, v = x2, v2
            wp.launch(sq_loss, dim=N, inputs=[x, self.target, loss])
        self.tape.backward(loss)
        if it == 0:
            print(f"loss0 = {loss.numpy()[0]}")
        wp.launch(sgd, dim=N, inputs=[self.k, self.k.grad, 0.05])


if __name__ == "__main__":
    trainer = Trainer()
    list(map(trainer.train_step, range(3)))
