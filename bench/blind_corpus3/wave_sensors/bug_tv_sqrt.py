# Recover the initial displacement of a membrane (6x6 coarse control points lifted onto
# the lower-left patch) from RMS sensor readings taken in four time segments.
import numpy as np
import warp as wp

import membrane

wp.config.quiet = True
wp.set_device("cpu")

SENSORS = [(4, 20), (10, 26), (20, 4), (26, 12), (16, 16), (28, 28), (8, 8), (22, 24)]


@wp.kernel
def sum_losses(parts: wp.array(dtype=float), total: wp.array(dtype=float)):
    wp.atomic_add(total, 0, parts[0])


@wp.kernel
def tv_penalty(c: wp.array2d(dtype=float), lam: float, total: wp.array(dtype=float)):
    i, j = wp.tid()
    dx = c[i + 1, j] - c[i, j]
    dy = c[i, j + 1] - c[i, j]
    wp.atomic_add(total, 0, lam * wp.sqrt(dx * dx + dy * dy))


@wp.kernel
def descend(x: wp.array2d(dtype=float), g: wp.array2d(dtype=float), lr: float):
    i, j = wp.tid()
    x[i, j] = x[i, j] - lr * g[i, j]


class Inversion:
    def __init__(self):
        self.sim = membrane.WaveSim(SENSORS)
        rng = np.random.default_rng(3)
        truth = rng.uniform(0.2, 1.0, (membrane.COARSE, membrane.COARSE)).astype(np.float32)
        self.target = self.measure(wp.array(truth, dtype=float))
        self.coarse = wp.full((membrane.COARSE, membrane.COARSE), 0.5, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()
        self.lr = 3.0
        self.tv_weight = 2.0e-4

    def measure(self, coarse):
        sim = self.sim
        sim.clear()
        sim.start(coarse)
        rows = []
        for k in range(sim.segments):
            sim.run_segment(k)
            rows.append(sim.energy_of(k).numpy() / sim.steps_per_segment)
        e = np.array(rows)
        # sensor noise floor
        return wp.array(np.sqrt(e) + 0.01, dtype=float)

    def iterate(self):
        sim = self.sim
        sim.clear()
        self.loss.zero_()
        with self.tape:
            sim.start(self.coarse)
            for k in range(sim.segments):
                sim.run_segment(k)
                part = sim.segment_loss(k, self.target)
                wp.launch(sum_losses, dim=1, inputs=[part], outputs=[self.loss])
            wp.launch(tv_penalty, dim=(membrane.COARSE - 1, membrane.COARSE - 1), inputs=[self.coarse, self.tv_weight],
                      outputs=[self.loss])
        self.tape.backward(self.loss)
        return float(self.loss.numpy()[0])

    def update(self):
        wp.launch(descend, dim=self.coarse.shape, inputs=[self.coarse, self.coarse.grad, self.lr])
        self.tape.reset()


def main():
    inv = Inversion()
    for it in range(5):
        value = inv.iterate()
        print("loss %d %.9g" % (it, value))
        if it == 0:
            g = inv.coarse.grad.numpy().flatten()
            print("grad coarse [%s]" % " ".join("%.9g" % x for x in g))
        inv.update()


if __name__ == "__main__":
    main()
