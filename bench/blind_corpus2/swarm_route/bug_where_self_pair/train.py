"""Route a flock around an obstacle by optimising the leader's waypoints.

The simulation lives in flock.py; this script owns the training loop. The rollout
is driven in segments (the way a longer horizon would be streamed), all of them
recorded on one tape, with a single backward per iteration and a hand-written
momentum update of the waypoints.

    python ok.py
"""

import numpy as np
import warp as wp

from flock import Flock


@wp.kernel
def momentum_step(
    params: wp.array(dtype=wp.vec2),
    grad: wp.array(dtype=wp.vec2),
    velocity: wp.array(dtype=wp.vec2),
    lr: float,
    beta: float,
    n_fixed: int,
):
    k = wp.tid()
    # the first waypoint is the flock's start and the last one is the goal: keep them
    if k < n_fixed or k == params.shape[0] - 1:
        return
    velocity[k] = beta * velocity[k] + grad[k]
    params[k] = params[k] - lr * velocity[k]


SEGMENT = 12


def fmt(a):
    return "[" + ", ".join("%.9g" % x for x in np.asarray(a).ravel()) + "]"


def train(iterations=5, lr=0.3, beta=0.5):
    flock = Flock()
    goal = wp.vec2(2.0, 0.0)
    route = np.linspace([0.0, 0.0], [2.0, 0.0], 6).astype(np.float32)
    waypoints = wp.array(route, dtype=wp.vec2, requires_grad=True)
    velocity = wp.zeros_like(waypoints)
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    tape = wp.Tape()
    for it in range(iterations):
        flock.reset()
        loss.zero_()
        with tape:
            for first in range(0, flock.steps, SEGMENT):
                flock.run_segment(first, min(first + SEGMENT, flock.steps), waypoints, loss)
            flock.final_cost(waypoints, goal, loss)
        tape.backward(loss)

        print("loss %d %.9g" % (it, loss.numpy()[0]))
        if it == 0:
            print("grad waypoints", fmt(waypoints.grad.numpy()[1:5]))

        wp.launch(momentum_step, waypoints.shape[0], inputs=[waypoints, waypoints.grad, velocity, lr, beta, 1])
        tape.reset()

    return waypoints


if __name__ == "__main__":
    wp.set_device("cpu")
    train()
