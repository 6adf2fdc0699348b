"""Learned Laplacian smoothing of a noisy closed curve: per-vertex smoothing
weights are trained so that a few explicit smoothing passes recover the
clean circle."""

import numpy as np
import warp as wp
import warp.optim

wp.config.log_level = wp.LOG_WARNING
wp.set_device("cpu")


@wp.func
def neighbour_mean(x: wp.array(dtype=wp.vec2), i: int):
    n = x.shape[0]
    return 0.5 * (x[(i + n - 1) % n] + x[(i + 1) % n])


@wp.kernel
def laplacian(x: wp.array(dtype=wp.vec2), w: wp.array(dtype=float), lap: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    s = wp.exp(w[i])  # positive weight
    lap[i] = s * (neighbour_mean(x, i) - x[i])


@wp.kernel
def apply_step(x_in: wp.array(dtype=wp.vec2), lap: wp.array(dtype=wp.vec2), alpha: float, x_out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    x_out[i] = x_in[i] + alpha * lap[i]


@wp.kernel
def shape_loss(x: wp.array(dtype=wp.vec2), target: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Smoother:
    def __init__(self, n=12, passes=6, alpha=0.3, lr=0.1):
        self.n, self.passes, self.alpha = n, passes, alpha
        rng = np.random.default_rng(7)
        th = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
        clean = np.stack([np.cos(th), np.sin(th)], axis=1).astype(np.float32)
        noisy = clean + 0.08 * rng.standard_normal((n, 2)).astype(np.float32)
        self.target = wp.array(0.93 * clean, dtype=wp.vec2)
        self.noisy = wp.array(noisy, dtype=wp.vec2)

        self.w = wp.zeros(n, dtype=float, requires_grad=True)
        self.x = wp.zeros(n, dtype=wp.vec2, requires_grad=True)
        self.x_next = wp.zeros(n, dtype=wp.vec2, requires_grad=True)
        self.laps = [wp.zeros(n, dtype=wp.vec2, requires_grad=True) for _ in range(passes)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()
        self.opt = warp.optim.Adam([self.w], lr=lr)

    def forward(self):
        self.tape.reset()
        wp.copy(self.x, self.noisy)
        self.loss.zero_()
        with self.tape:
            for k in range(self.passes):
                wp.launch(laplacian, dim=self.n, inputs=[self.x, self.w], outputs=[self.laps[k]])
                wp.launch(apply_step, dim=self.n, inputs=[self.x, self.laps[k], self.alpha], outputs=[self.x_next])
                wp.copy(self.x, self.x_next)
            wp.launch(shape_loss, dim=self.n, inputs=[self.x, self.target], outputs=[self.loss])
        return self.loss

    def backward(self):
        self.tape.backward(self.loss)

    def update(self):
        self.opt.step([self.w.grad])


def run(example, iters):
    for it in range(iters):
        loss = example.forward()
        example.backward()
        print(f"loss {it} {loss.numpy()[0]:.9g}")
        if it == 0:
            print("grad", "w", np.array2string(example.w.grad.numpy().ravel()[:8], precision=9))
        example.update()


if __name__ == "__main__":
    run(Smoother(), 4)
