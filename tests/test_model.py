"""The static model: warp aliases, kernel parameter facts, launch binding, host traces."""

from __future__ import annotations

import textwrap

from warpfix.model import SourceFile, build_project, module_name_for


def project(**files: str):
    srcs = {
        f"{name}.py": SourceFile.parse(f"{name}.py", textwrap.dedent(code), module_name_for(f"{name}.py"))
        for name, code in files.items()
    }
    return build_project(srcs)


def test_warp_aliases() -> None:
    src = SourceFile.parse("m.py", "import warp as W\nfrom warp import where as sel\nimport warp.sim\n")
    import ast

    assert src.warp_name(ast.parse("W.launch").body[0].value) == "launch"
    assert src.warp_name(ast.parse("sel").body[0].value) == "where"
    assert src.warp_name(ast.parse("warp.sim.Model").body[0].value) == "sim.Model"
    assert src.warp_name(ast.parse("np.where").body[0].value) is None


KERNELS = """
import warp as wp
N = 4

@wp.struct
class Params:
    k: wp.array(dtype=float)

@wp.func
def bump(a: wp.array(dtype=float), i: int):
    a[i] = a[i] + 1.0

@wp.kernel
def k(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float),
      p: Params, n: int):
    i = wp.tid()
    x[i] *= 2.0
    y[i] += x[i]
    wp.atomic_add(z, 0, 1.0)
    p.k[i] = 0.0
    for j in range(n):
        y[j] += 1.0
    for j in range(N):
        y[j] += 1.0
    bump(z, i)
"""


def test_kernel_param_facts() -> None:
    pr = project(m=KERNELS)
    k = pr.kernel_named("k")
    assert k is not None and k.kind == "kernel"
    assert k.positional == ["x", "y", "z", "p", "n"]
    assert [a.kind for a in k.params["x"].accesses] == ["inplace_mul", "read"]
    assert k.params["y"].accumulated and not k.params["y"].written
    loops = [a.loops for a in k.params["y"].accesses if a.kind == "accum"]
    assert loops == [(), ("dynamic",), ("static",)]
    assert k.params["z"].has("atomic")
    assert k.params["z"].has("rmw")  # folded from bump(): a[i] = a[i] + 1
    assert any(a.via == "bump" for a in k.params["z"].accesses)
    assert k.params["p.k"].written and k.params["p.k"].is_struct
    assert pr.kernel_named("Params").kind == "struct"


HOST = """
import warp as wp
from sim import step

@wp.kernel
def loss_k(x: wp.array(dtype=float), l: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(l, 0, x[i])

def run(states, v, loss):
    for i in range(2):
        wp.launch(step, 4, inputs=[states[i], v], outputs=[states[i + 1]])

def main():
    v = wp.zeros(4, dtype=float, requires_grad=True)
    states = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(3)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        run(states, v, loss)
        wp.launch(loss_k, 4, inputs=[states[2], loss])
    tape.backward(loss)
    g = v.grad.numpy()
    a, b = states[0], states[1]
    a, b = b, a

main()
"""

SIM = """
import warp as wp

@wp.kernel
def step(x: wp.array(dtype=float), v: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] + v[i]
"""


def test_host_trace_binds_launches_across_files_and_calls() -> None:
    pr = project(main=HOST, sim=SIM)
    trace = next(t for t in pr.traces if t.root == "main.py:<module>")
    kinds = [e.kind for e in trace.events]
    assert kinds[:4] == ["alloc", "alloc", "tape_begin", "launch"]
    launches = [e for e in trace.events if e.kind == "launch"]
    assert [e.kernel.name for e in launches] == ["step", "step", "loss_k"]
    first, second, loss = launches
    # states[1] written by the first step is the buffer the second step reads
    assert first.binding["y"].id == second.binding["x"].id
    assert first.binding["x"].id != second.binding["y"].id
    assert [s.line for s in first.call_stack] == [27, 20]  # main() at module level, then run(...)
    assert all(e.recorded for e in launches)
    assert first.binding["v"].requires_grad is True
    assert loss.accums and loss.accums[0].label == "loss"
    assert "backward" in kinds and "grad_read" in kinds and "swap" in kinds
    backward = next(e for e in trace.events if e.kind == "backward")
    assert not backward.recorded and backward.reads[0].id == loss.accums[0].id


def test_loops_unroll_three_iterations_and_the_last_and_ifs_tag_arms() -> None:
    code = """
    import warp as wp

    @wp.kernel
    def f(x: wp.array(dtype=float)):
        x[0] = 1.0

    def main(flag):
        a = wp.zeros(1)
        for it in range(10):
            if flag:
                wp.launch(f, 1, inputs=[a])
            else:
                a.zero_()
    """
    pr = project(m=code)
    trace = next(t for t in pr.traces if t.root == "m.py:main")
    launches = [e for e in trace.events if e.kind in ("launch", "zero")]
    assert [e.loops[-1][1] for e in launches] == [0, 0, 1, 1, 2, 2, 3, 3]  # iterations 0, 1, 2 and 9
    from warpfix.model.facts import exclusive

    assert exclusive(launches[0], launches[1])
    assert not exclusive(launches[0], launches[2])


def test_requires_grad_inherited_by_like_and_clone() -> None:
    code = """
    import warp as wp
    def main():
        a = wp.zeros(3, requires_grad=True)
        b = wp.zeros_like(a)
        c = wp.clone(a)
        d = wp.empty_like(a, requires_grad=False)
        e = wp.zeros(3)
        v = wp.array(ptr=a.ptr, shape=3, dtype=float)
        tape = wp.Tape()
    """
    pr = project(m=code)
    trace = pr.traces[0]
    bufs = {e.writes[0].label: e.writes[0] for e in trace.events if e.kind in ("alloc", "clone")}
    assert bufs["b"].requires_grad is True and bufs["c"].requires_grad is True
    assert bufs["d"].requires_grad is False and bufs["e"].requires_grad is False
    assert bufs["v"].view_of is bufs["a"]


def test_negative_index_rebind_and_trip_counts() -> None:
    code = """
    import warp as wp

    @wp.kernel
    def f(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        y[0] = x[0]

    def main():
        states = [wp.zeros(1) for _ in range(3)]
        tape = wp.Tape()
        for w in range(1):
            with tape:
                wp.launch(f, 1, inputs=[states[0]], outputs=[states[1]])
                wp.launch(f, 1, inputs=[states[1]], outputs=[states[-1]], record_tape=False)
            states[0] = states[-1]
    """
    pr = project(m=code)
    trace = next(t for t in pr.traces if t.root == "m.py:main")
    launches = [e for e in trace.events if e.kind == "launch"]
    assert len(launches) == 2  # range(1) runs once
    assert launches[0].recorded and not launches[1].recorded
    rebind = next(e for e in trace.events if e.kind == "rebind")
    assert rebind.detail == {"target": "states[0]", "source": "states[-1]"}
    assert rebind.reads[0].id == launches[1].writes[0].id  # states[-1] is states[2]


def test_known_trip_counts_slices_and_struct_fields() -> None:
    code = """
    import warp as wp

    @wp.struct
    class Particles:
        q: wp.array(dtype=float)

    @wp.kernel
    def f(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        y[0] = x[0]

    def window(states):
        for s in range(2):
            wp.launch(f, 1, inputs=[states[s]], outputs=[states[s + 1]])

    def main():
        states = [wp.zeros(1) for _ in range(7)]
        for s in range(6):
            wp.launch(f, 1, inputs=[states[s]], outputs=[states[s + 1]])
        wp.launch(f, 1, inputs=[states[-1]], outputs=[states[0]])
        window(states[2:5])
        p = Particles()
        p.q = states[0]
    """
    pr = project(m=code)
    trace = next(t for t in pr.traces if t.root == "m.py:main")
    launches = [e for e in trace.events if e.kind == "launch"]
    by_name = {e.name_of(e.writes[0]) for e in launches[:3]}
    assert len(launches) == 7 and by_name == {"states[s + 1]"}
    last = launches[3]
    assert [lp[1] for lp in last.loops] == [3]  # passes 0, 1, 2 and the last iteration (s = 5)
    assert launches[4].reads[0].id == last.writes[0].id  # states[-1] is what s = 5 wrote
    w0, w1 = launches[5], launches[6]
    assert w0.reads[0].id == launches[1].writes[0].id  # window's states[0] is states[2]
    assert w1.reads[0].id == w0.writes[0].id
    field = next(e for e in trace.events if e.kind == "field_set")
    assert field.detail == {"target": "p.q", "field": "q"}
    assert field.writes[0].id == launches[0].reads[0].id


def test_unevaluable_index_differs_across_passes_and_methods_get_own_traces() -> None:
    code = """
    import warp as wp

    @wp.kernel
    def f(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        y[0] = x[0]

    class Sim:
        def __init__(self):
            self.controls = [wp.zeros(1) for _ in range(10)]
            self.tick = 0
            self.tape = wp.Tape()

        def step(self):
            c = self.controls[min(self.tick, 9)]
            wp.launch(f, 1, inputs=[c], outputs=[c])
            self.tick += 1

        def rollout(self):
            with self.tape:
                for _ in range(self.n):
                    self.step()

        def log(self):
            print(self.controls[0].grad)
    """
    pr = project(m=code)
    by_root = {t.root: t for t in pr.traces}
    assert {"m.py:Sim.rollout", "m.py:Sim.log"} <= set(by_root)
    launches = [e for e in by_root["m.py:Sim.rollout"].events if e.kind == "launch"]
    assert len(launches) == 3 and len({e.reads[0].id for e in launches}) == 3
    assert launches[0].reads[0].id == launches[0].writes[0].id  # same pass, same element
    assert not any(e.kind == "launch" for e in by_root["m.py:Sim.log"].events)


def test_properties_are_inlined() -> None:
    code = """
    import warp as wp

    @wp.kernel
    def f(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        y[0] = x[0]

    class Drone:
        def __init__(self):
            self.controls = [wp.zeros(1) for _ in range(10)]
            self.tick = 0

        @property
        def control(self):
            return self.controls[min(self.tick, 9)]

    def main(n):
        d = Drone()
        for _ in range(n):
            wp.launch(f, 1, inputs=[d.control], outputs=[d.control])
            d.tick += 1
    """
    pr = project(m=code)
    trace = next(t for t in pr.traces if t.root == "m.py:main")
    launches = [e for e in trace.events if e.kind == "launch"]
    assert launches[0].reads[0].id != launches[1].reads[0].id


def test_property_names_on_unknown_receivers_are_not_stable_values() -> None:
    code = """
    import warp as wp

    @wp.kernel
    def f(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        y[0] = x[0]

    class Drone:
        @property
        def control(self):
            return self.controls[self.tick]

    def rollout(drone, n):
        tape = wp.Tape()
        with tape:
            for _ in range(n):
                wp.launch(f, 1, inputs=[drone.state], outputs=[drone.control.torque])
                wp.launch(f, 1, inputs=[drone.control.torque], outputs=[drone.state])
    """
    pr = project(m=code)
    trace = next(t for t in pr.traces if t.root == "m.py:rollout")
    launches = [e for e in trace.events if e.kind == "launch"]
    assert launches[1].reads[0].id != launches[2].writes[0].id  # drone.control differs per access
    assert launches[0].reads[0].id == launches[1].writes[0].id  # plain attributes stay one value


def test_repeated_list_shares_one_object_until_an_item_is_rebound() -> None:
    code = """
    import warp as wp

    @wp.kernel
    def f(x: wp.array(dtype=float)):
        x[0] = 1.0

    def main():
        xs = [wp.zeros(1)] * 3
        fresh = wp.zeros(1)
        xs[2] = fresh
        tape = wp.Tape()
        with tape:
            wp.launch(f, 1, inputs=[xs[0]])
            wp.launch(f, 1, inputs=[xs[1]])
            wp.launch(f, 1, inputs=[xs[2]])
    """
    pr = project(m=code)
    trace = next(t for t in pr.traces if t.root == "m.py:main")
    a, b, c = (e.writes[0].id for e in trace.events if e.kind == "launch")
    assert a == b and c != a
