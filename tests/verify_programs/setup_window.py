"""Buggy (WF601): a tape and a backward per segment, and the parameter enters only in the first segment's set-up
(`if k == 0:`); the later segments reach it only through the state the first carries over, which their own
backwards treat as constant. `--hoisted` records the segments on one tape, one backward of the running total."""

import sys

import warp as wp


@wp.kernel
def lift(c: wp.array(dtype=float), u: wp.array(dtype=float)):
    i = wp.tid()
    u[i] = c[0] * float(i + 1)


@wp.kernel
def advance(u: wp.array(dtype=float), u_next: wp.array(dtype=float)):
    i = wp.tid()
    u_next[i] = u[i] - 0.1 * u[i] * u[i] * u[i]


@wp.kernel
def energy(u: wp.array(dtype=float), part: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(part, 0, u[i] * u[i])


@wp.kernel
def add_into(part: wp.array(dtype=float), total: wp.array(dtype=float)):
    wp.atomic_add(total, 0, part[0])


def main():
    hoisted = "--hoisted" in sys.argv
    segments = 3
    c = wp.array([0.3], dtype=float, requires_grad=True)
    u = [wp.zeros(8, dtype=float, requires_grad=True) for _ in range(segments + 1)]
    parts = [wp.zeros(1, dtype=float, requires_grad=True) for _ in range(segments)]
    total = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(2):
        total.zero_()
        for p in parts:
            p.zero_()
        if hoisted:
            tape = wp.Tape()
            with tape:
                for k in range(segments):
                    if k == 0:
                        wp.launch(lift, dim=8, inputs=[c], outputs=[u[0]])
                    wp.launch(advance, dim=8, inputs=[u[k]], outputs=[u[k + 1]])
                    wp.launch(energy, dim=8, inputs=[u[k + 1]], outputs=[parts[k]])
                    wp.launch(add_into, dim=1, inputs=[parts[k]], outputs=[total])
            tape.backward(total)
        else:
            for k in range(segments):
                tape = wp.Tape()
                with tape:
                    if k == 0:
                        wp.launch(lift, dim=8, inputs=[c], outputs=[u[0]])
                    wp.launch(advance, dim=8, inputs=[u[k]], outputs=[u[k + 1]])
                    wp.launch(energy, dim=8, inputs=[u[k + 1]], outputs=[parts[k]])
                    wp.launch(add_into, dim=1, inputs=[parts[k]], outputs=[total])
                tape.backward(parts[k])
        print(f"loss {it} {total.numpy()[0]:.9g} grad {c.grad.numpy()}")
        c.assign(c.numpy() - 0.01 * c.grad.numpy())
        tape.zero()  # the hoisted tape's, and the last segment's: every segment records a new tape
        c.grad.zero_()


if __name__ == "__main__":
    main()
