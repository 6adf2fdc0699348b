"""Tiny 1-8-1 tanh MLP fitted to a sine wave. Weights live in a wp.struct,
the backward pass is seeded by hand and Adam does the updates."""

import numpy as np
import warp as wp
import warp.optim

wp.config.log_level = wp.LOG_WARNING
wp.set_device("cpu")

HIDDEN = wp.constant(8)


@wp.struct
class MLP:
    w1: wp.array(dtype=float)
    b1: wp.array(dtype=float)
    w2: wp.array(dtype=float)
    b2: wp.array(dtype=float)


@wp.func
def act(z: float):
    return wp.tanh(z)


@wp.kernel
def layer1(x: wp.array(dtype=float), net: MLP, pre: wp.array2d(dtype=float)):
    i, j = wp.tid()
    pre[i, j] = net.w1[j] * x[i] + net.b1[j]


@wp.kernel
def activation(pre: wp.array2d(dtype=float), h: wp.array2d(dtype=float)):
    i, j = wp.tid()
    h[i, j] = act(pre[i, j])


@wp.kernel
def layer2(h: wp.array2d(dtype=float), net: MLP, y: wp.array(dtype=float)):
    i = wp.tid()
    s = net.b2[0]
    for j in range(HIDDEN):
        s += net.w2[j] * h[i, j]
    y[i] = s


@wp.kernel
def mse(pred: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    r = pred[i] - target[i]
    wp.atomic_add(loss, 0, r * r / float(pred.shape[0]))


class Regressor:
    def __init__(self, n=16, lr=0.05, seed=0):
        rng = np.random.default_rng(seed)
        xs = np.linspace(-1.0, 1.0, n, dtype=np.float32)
        self.n = n
        self.x = wp.array(xs, dtype=float)
        self.y = wp.array(np.sin(3.0 * xs).astype(np.float32), dtype=float)

        self.net = MLP()
        self.net.w1 = wp.array(rng.normal(0.0, 1.5, HIDDEN).astype(np.float32), dtype=float, requires_grad=True)
        self.net.b1 = wp.array(rng.normal(0.0, 0.5, HIDDEN).astype(np.float32), dtype=float, requires_grad=True)
        self.net.w2 = wp.array(rng.normal(0.0, 0.5, HIDDEN).astype(np.float32), dtype=float, requires_grad=True)
        self.net.b2 = wp.zeros(1, dtype=float, requires_grad=True)
        self.params = {"w1": self.net.w1, "b1": self.net.b1, "w2": self.net.w2, "b2": self.net.b2}

        self.pre = wp.zeros((n, HIDDEN), dtype=float, requires_grad=True)
        self.h = wp.zeros((n, HIDDEN), dtype=float, requires_grad=True)
        self.pred = wp.zeros(n, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.seed = wp.ones(1, dtype=float)

        self.opt = warp.optim.Adam(list(self.params.values()), lr=lr)
        self.tape = wp.Tape()

    def forward(self):
        self.loss.zero_()
        wp.launch(layer1, dim=(self.n, HIDDEN), inputs=[self.x, self.net], outputs=[self.pre])
        wp.launch(activation, dim=(self.n, HIDDEN), inputs=[self.pre], outputs=[self.h])
        wp.launch(layer2, dim=self.n, inputs=[self.h, self.net], outputs=[self.pred])
        wp.launch(mse, dim=self.n, inputs=[self.pred, self.y], outputs=[self.loss])

    def step(self):
        with self.tape:
            self.forward()
            self.opt.step([p.grad for p in self.params.values()])
        self.tape.backward(grads={self.loss: self.seed})
        grads = {k: p.grad.numpy().copy() for k, p in self.params.items()}
        self.tape.reset()
        return grads


if __name__ == "__main__":
    model = Regressor()
    for it in range(4):
        grads = model.step()
        print(f"loss {it} {model.loss.numpy()[0]:.9g}")
        if it == 0:
            for name, g in grads.items():
                print("grad", name, np.array2string(g.ravel()[:8], precision=9))
