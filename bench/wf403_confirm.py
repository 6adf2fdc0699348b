"""Are the WF403 errors `check` reports in Warp's own wheel real? Measured, not argued:

    python bench/wf403_confirm.py                        # the two kernel shapes, against their analytic gradients
    python bench/wf403_confirm.py --diffray-fixed F.py   # + diffray as shipped vs F (its `warpfix apply` rewrite)

1. diffray's shape (`draw_kernel`): a sum over a dynamic loop, then `lambert * color` after it. Warp's backward
   does not replay a dynamic loop before the code after it, so that product's adjoint reads `lambert` as 0.
2. test_noise's shape (`curlnoise_2d_reimpl_loss`): `amp` and `freq` carried across a dynamic loop. The reverse
   loop replays the body and reads the advanced values, off by one factor each: the test's parameters
   (gain 0.5, lacunarity 2.0) multiply to 1, so the errors cancel and Warp's test passes; other values do not.
3. With ``--diffray-fixed`` (needs pxr): the example's first loss and rotation gradient, shipped and rewritten.

Each prints autodiff against the analytic gradient (or the two programs side by side); nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from pathlib import Path

import numpy as np
import warp as wp


@wp.kernel
def lambert_then_scale(n: int, w: wp.array(dtype=float), c: wp.array(dtype=float), out: wp.array(dtype=float)):
    lam = float(0.0)  # noqa: UP018 - a Warp variable a dynamic loop may mutate
    for i in range(n):
        val = w[i] * 2.0
        if val < 0.0:
            val = 0.0
        lam = lam + val
    out[0] = lam * c[0]


@wp.kernel
def octaves(n: int, x: wp.array(dtype=float), lac: float, gain: float, out: wp.array(dtype=float)):
    freq = float(1.0)  # noqa: UP018 - a Warp variable a dynamic loop may mutate
    amp = float(1.0)  # noqa: UP018 - a Warp variable a dynamic loop may mutate
    acc = float(0.0)  # noqa: UP018 - a Warp variable a dynamic loop may mutate
    for _ in range(n):
        acc = acc + amp * wp.sin(freq * x[0])
        amp = amp * gain
        freq = freq * lac
    out[0] = acc


def _grads(kernel: wp.Kernel, inputs: list, leaves: list[wp.array]) -> list[np.ndarray]:
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=1, inputs=[*inputs, out])
    tape.backward(grads={out: wp.array([1.0], dtype=float)})
    return [leaf.grad.numpy().copy() for leaf in leaves]


def kernel_shapes() -> None:
    w = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    c = wp.array([5.0], dtype=float, requires_grad=True)
    dw, dc = _grads(lambert_then_scale, [3, w, c], [w, c])
    print(f"diffray shape:    d/dw autodiff {dw} analytic [10. 10. 10.]; d/dc autodiff {dc[0]:g} analytic 12")
    x0 = 0.17
    for lac, gain in ((2.0, 0.5), (3.0, 0.5), (2.0, 0.7)):
        x = wp.array([x0], dtype=float, requires_grad=True)
        (dx,) = _grads(octaves, [3, x, lac, gain], [x])
        exact = sum(gain**o * lac**o * math.cos(lac**o * x0) for o in range(3))
        print(f"test_noise shape: lacunarity {lac} gain {gain} (product {lac * gain:g}): autodiff {dx[0]:.6f} "
              f"analytic {exact:.6f}")


def diffray(shipped: Path, fixed: Path) -> None:
    def first_step(path: Path, name: str) -> tuple[float, np.ndarray]:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        ex = mod.Example(height=32, train_iters=1)
        tape = wp.Tape()
        with tape:
            ex.forward()
        tape.backward(ex.loss)
        return float(ex.loss.numpy()[0]), tape.gradients[ex.render_mesh.rot].numpy()[0]

    for label, path in (("shipped", shipped), ("fixed", fixed)):
        loss, grad = first_step(path, f"diffray_{label}")
        print(f"diffray {label:8s} first loss {loss!r}, d loss / d rot {grad}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--diffray-fixed", type=Path, help="example_diffray.py after `warpfix apply`")
    args = parser.parse_args()
    wp.config.quiet = True
    wp.set_device("cpu")
    kernel_shapes()
    if args.diffray_fixed:
        diffray(Path(wp.__file__).parent / "examples" / "optim" / "example_diffray.py", args.diffray_fixed)


if __name__ == "__main__":
    main()
