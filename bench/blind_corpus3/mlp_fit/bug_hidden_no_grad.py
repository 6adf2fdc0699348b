# Fit a 2-16-16-1 tanh MLP to f(x, y) = sin(3x) cos(2y) with plain Warp kernels
# (no tiles), minibatches staged into a fixed input buffer, Adam.
import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True
wp.set_device("cpu")

BATCH = 32
SIZES = [2, 16, 16, 1]


@wp.kernel
def dense(x: wp.array2d(dtype=float), W: wp.array2d(dtype=float), b: wp.array(dtype=float),
          z: wp.array2d(dtype=float)):
    i, j = wp.tid()
    s = b[j]
    for k in range(W.shape[1]):
        s += W[j, k] * x[i, k]
    z[i, j] = s


@wp.kernel
def tanh_act(z: wp.array2d(dtype=float), h: wp.array2d(dtype=float)):
    i, j = wp.tid()
    h[i, j] = wp.tanh(z[i, j])


@wp.kernel
def mse(pred: wp.array2d(dtype=float), y: wp.array(dtype=float), scale: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = pred[i, 0] - y[i]
    wp.atomic_add(loss, 0, scale * d * d)


class MLP:
    def __init__(self, sizes, batch, seed=0):
        rng = np.random.default_rng(seed)
        self.weights, self.biases = [], []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            w = rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_out, n_in)).astype(np.float32)
            self.weights.append(wp.array(w, dtype=float, requires_grad=True))
            self.biases.append(wp.zeros(n_out, dtype=float, requires_grad=True))
        # per-layer buffers: pre-activations z[l] and activations h[l]
        self.z = [wp.zeros((batch, n), dtype=float, requires_grad=True) for n in sizes[1:]]
        self.h = [wp.zeros((batch, n), dtype=float) for n in sizes[1:-1]]

    def params(self):
        return [p for wb in zip(self.weights, self.biases) for p in wb]

    def forward(self, x):
        layer_in = x
        n_layers = len(self.weights)
        for l in range(n_layers):
            wp.launch(dense, dim=self.z[l].shape, inputs=[layer_in, self.weights[l], self.biases[l]],
                      outputs=[self.z[l]])
            if l < n_layers - 1:
                wp.launch(tanh_act, dim=self.z[l].shape, inputs=[self.z[l]], outputs=[self.h[l]])
                layer_in = self.h[l]
        return self.z[-1]


def main():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1.0, 1.0, (256, 2)).astype(np.float32)
    Y = (np.sin(3.0 * X[:, 0]) * np.cos(2.0 * X[:, 1])).astype(np.float32)
    order = rng.permutation(256)
    X_dev = wp.array(X[order], dtype=float)
    Y_dev = wp.array(Y[order], dtype=float)

    net = MLP(SIZES, BATCH)
    params = net.params()
    opt = warp.optim.Adam([p.flatten() for p in params], lr=0.02)

    x_stage = wp.zeros((BATCH, 2), dtype=float)
    y_stage = wp.zeros(BATCH, dtype=float)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    names = ["W0", "b0", "W1", "b1", "W2", "b2"]

    for it in range(5):
        lo = (it * BATCH) % 256
        wp.copy(x_stage, X_dev[lo:lo + BATCH])
        wp.copy(y_stage, Y_dev[lo:lo + BATCH])
        loss.zero_()
        with tape:
            pred = net.forward(x_stage)
            wp.launch(mse, dim=BATCH, inputs=[pred, y_stage, 1.0 / BATCH], outputs=[loss])
        tape.backward(loss)
        print("loss %d %.9g" % (it, loss.numpy()[0]))
        if it == 0:
            for name, p in zip(names, params):
                g = p.grad.numpy().flatten()[:6]
                print("grad %s [%s]" % (name, " ".join("%.9g" % v for v in g)))
        opt.step([p.grad.flatten() for p in params])
        tape.reset()


if __name__ == "__main__":
    main()
