"""``warpfix.fixes.compute_edits``: codemod selection, safety gating, cross-file rewrites, line mapping."""

from __future__ import annotations

import textwrap

import pytest

from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.fixes import compute_edits


def finding(rule: str, path: str, line: int, *, safety: FixSafety = FixSafety.SAFE, column: int = 1, **data) -> Finding:
    return Finding(
        rule=rule, name=rule.lower(), severity=Severity.ERROR, span=Span(path, line, column, line, column + 1),
        message="m", fix=Fix(safety, "fix"), data=data,
    )


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


KERNELS = src("""
    import warp as wp


    @wp.kernel
    def scale(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
        i = wp.tid()
        x[i] *= s + 1.0  # in place
        y[i] = x[i] * 2.0
""")

MAIN = src("""
    import warp as wp

    import kernels
    from kernels import scale


    def step(state, n):
        wp.launch(kernels.scale, dim=n, inputs=[state.x, 2.0], outputs=[state.y])


    def run(n):
        q = wp.zeros(n, dtype=float, requires_grad=True)
        y = wp.zeros(n, dtype=float, requires_grad=True)
        with wp.Tape() as tape:
            # step
            wp.launch(
                kernel=scale,
                dim=n,
                inputs=[q, 2.0, y],
            )
        return q
""")


def test_kernel_output_rewrites_kernel_and_every_launch_site() -> None:
    result = compute_edits({"kernels.py": KERNELS, "main.py": MAIN}, [finding("WF401", "kernels.py", 7, column=5)])
    assert result.skipped == []
    assert result.new_sources["kernels.py"] == src("""
        import warp as wp


        @wp.kernel
        def scale(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float), x_out: wp.array(dtype=float)):
            i = wp.tid()
            x_out[i] = x[i] * (s + 1.0)  # in place
            y[i] = x_out[i] * 2.0
    """)
    assert result.new_sources["main.py"] == src("""
        import warp as wp

        import kernels
        from kernels import scale


        def step(state, n):
            x_out = wp.empty_like(state.x)
            wp.launch(kernels.scale, dim=n, inputs=[state.x, 2.0], outputs=[state.y, x_out])
            state.x = x_out


        def run(n):
            q = wp.zeros(n, dtype=float, requires_grad=True)
            y = wp.zeros(n, dtype=float, requires_grad=True)
            with wp.Tape() as tape:
                # step
                x_out = wp.empty_like(q)
                wp.launch(
                    kernel=scale,
                    dim=n,
                    inputs=[q, 2.0, y],
                    outputs=[x_out],
                )
                q = x_out
            return q
    """)


def test_kernel_output_is_all_or_nothing() -> None:
    main = MAIN + "\nk = scale\n"
    result = compute_edits({"kernels.py": KERNELS, "main.py": main}, [finding("WF401", "kernels.py", 7)])
    assert result.new_sources == {}
    [(_, reason)] = result.skipped
    assert "other than as a launched kernel" in reason


def test_kernel_without_launch_is_skipped() -> None:
    result = compute_edits({"kernels.py": KERNELS}, [finding("WF106", "kernels.py", 7)])
    assert result.new_sources == {}
    assert "no launch of scale" in result.skipped[0][1]


def test_rmw_assignment_and_parameter_argument() -> None:
    code = src("""
        @wp.kernel
        def clamp(x: wp.array(dtype=float)):
            i = wp.tid()
            x[i] = wp.min(x[i], 1.0)


        def apply(x):
            wp.launch(clamp, dim=1, inputs=[x])
    """)
    result = compute_edits({"m.py": code}, [finding("WF106", "m.py", 4)])
    assert result.new_sources == {}
    assert "apply(), which is never called" in result.skipped[0][1]


def test_a_helper_parameter_is_returned_and_rebound_at_every_call_site() -> None:
    code = src("""
        @wp.kernel
        def clamp(x: wp.array(dtype=float)):
            i = wp.tid()
            x[i] = wp.min(x[i], 1.0)


        def run_stack(signal, n):
            wp.launch(clamp, dim=n, inputs=[signal])


        def train(state, n):
            with wp.Tape() as tape:
                run_stack(state.u, n)
                run_stack(signal=state.v, n=n)
    """)
    result = compute_edits({"m.py": code}, [finding("WF106", "m.py", 4)])
    assert result.skipped == []
    assert result.new_sources["m.py"].endswith(src("""
        def run_stack(signal, n):
            x_out = wp.empty_like(signal)
            wp.launch(clamp, dim=n, inputs=[signal], outputs=[x_out])
            signal = x_out
            return signal


        def train(state, n):
            with wp.Tape() as tape:
                state.u = run_stack(state.u, n)
                state.v = run_stack(signal=state.v, n=n)
    """))
    assert "run_stack() now returns the new signal; 2 call site(s)" in result.note(result.applied[0])


def test_a_helper_parameter_is_all_or_nothing() -> None:
    base = src("""
        @wp.kernel
        def clamp(x: wp.array(dtype=float)):
            i = wp.tid()
            x[i] = wp.min(x[i], 1.0)


        def run_stack(signal):
            wp.launch(clamp, dim=1, inputs=[signal])
    """)
    for tail, why in (
        ("\n\ny = run_stack(a)\n", "other than as a call statement"),
        ("\n\ndef f(a):\n    run_stack(a)\n", "would not reach its caller"),
        ("\n\nrun_stack(a)\nfs = [run_stack]\n", "other than as a call statement"),
    ):
        result = compute_edits({"m.py": base + tail}, [finding("WF106", "m.py", 4)])
        assert result.new_sources == {}, tail
        assert why in result.skipped[0][1], (tail, result.skipped)
    imported = compute_edits({"m.py": base + "\n\nrun_stack(a)\n", "n.py": "from m import run_stack\n"},
                             [finding("WF106", "m.py", 4)])
    assert imported.new_sources == {}
    assert "n.py imports" in imported.skipped[0][1]


def test_safety_gating() -> None:
    code = "@wp.kernel(enable_backward=False)\ndef k():\n    pass\n"
    unsafe = finding("WF202", "m.py", 1, safety=FixSafety.UNSAFE)
    assert compute_edits({"m.py": code}, [unsafe]).skipped[0][1] == "unsafe fix: needs --unsafe-fixes"
    assert compute_edits({"m.py": code}, [unsafe], unsafe=True).new_sources == {"m.py": "@wp.kernel\ndef k():\n    pass\n"}
    diagnostic = finding("WF801", "m.py", 1, safety=FixSafety.NONE)
    assert compute_edits({"m.py": code}, [diagnostic]).skipped[0][1] == "diagnostic only: no fix"
    assert compute_edits({"m.py": code}, [finding("WF704", "m.py", 1)]).skipped[0][1] == "no automatic fix for WF704"


def test_several_findings_in_one_file_map_their_lines() -> None:
    code = src("""
        with wp.Tape() as tape:
            wp.launch(k, dim=n, inputs=[x], outputs=[loss])
            log(loss)
            m = metric(x)
        tape.backward(loss)
        d = wp.sqrt(wp.dot(v, v))
        h = wp.zeros(n)
    """)
    findings = [finding("WF302", "m.py", 3), finding("WF302", "m.py", 4), finding("WF702", "m.py", 6),
                finding("WF201", "m.py", 7)]
    result = compute_edits({"m.py": code}, findings)
    assert result.skipped == []
    assert result.new_sources["m.py"] == src("""
        with wp.Tape() as tape:
            wp.launch(k, dim=n, inputs=[x], outputs=[loss])
        tape.backward(loss)
        log(loss)
        m = metric(x)
        d = wp.length(v)
        h = wp.zeros(n, requires_grad=True)
    """)
    # a second run over the rewritten code with the same (now stale) findings changes nothing
    again = compute_edits(result.new_sources, findings)
    assert again.new_sources == {}


def test_unparsable_source_is_skipped() -> None:
    result = compute_edits({"m.py": "def (:\n"}, [finding("WF702", "m.py", 1)])
    assert result.new_sources == {}
    assert "cannot parse" in result.skipped[0][1]


# -- issue 11: a kernel-signature rewrite follows imports, not names ------------------------------
SIM = src("""
    import warp as wp


    @wp.kernel
    def scale(x: wp.array(dtype=float), s: float):
        i = wp.tid()
        x[i] *= s
""")

RUN = src("""
    import warp as wp

    from sim import scale

    x = wp.ones(4, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp.launch(scale, dim=4, inputs=[x, 2.0])
""")

CLEAN_SIM = src("""
    import warp as wp


    @wp.kernel
    def scale(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * s
""")

CLEAN_RUN = src("""
    import warp as wp

    import sim

    x = wp.ones(4, dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp.launch(sim.scale, dim=4, inputs=[x, 2.0], outputs=[y])
""")


def test_kernel_output_leaves_a_same_named_kernel_of_a_sibling_program_alone() -> None:
    sources = {"a/sim.py": SIM, "a/run.py": RUN, "b/sim.py": CLEAN_SIM, "b/run.py": CLEAN_RUN}
    result = compute_edits(sources, [finding("WF401", "a/sim.py", 7)])
    assert result.skipped == []
    assert sorted(result.new_sources) == ["a/run.py", "a/sim.py"]
    assert "outputs=[x_out]" in result.new_sources["a/run.py"]


def test_two_buggy_copies_each_get_their_own_edit_once() -> None:
    sources = {"a/sim.py": SIM, "a/run.py": RUN, "c/sim.py": SIM, "c/run.py": RUN.replace("from sim", "from .sim"),
               "c/__init__.py": "", "b/sim.py": CLEAN_SIM, "b/run.py": CLEAN_RUN}
    result = compute_edits(sources, [finding("WF401", "a/sim.py", 7), finding("WF401", "c/sim.py", 7)])
    assert result.skipped == []
    assert sorted(result.new_sources) == ["a/run.py", "a/sim.py", "c/run.py", "c/sim.py"]
    for run in ("a/run.py", "c/run.py"):
        assert result.new_sources[run].count("x_out") == 3  # allocated, passed once, rebound


def test_kernel_output_follows_a_package_re_export_and_a_module_alias() -> None:
    sources = {
        "pkg/__init__.py": "from pkg.kernels import scale\n",
        "pkg/kernels.py": SIM,
        "main.py": src("""
            import warp as wp

            import pkg
            import pkg.kernels as pk

            x = wp.ones(4, dtype=float, requires_grad=True)
            with wp.Tape() as tape:
                wp.launch(pkg.scale, dim=4, inputs=[x, 2.0])
                wp.launch(pk.scale, dim=4, inputs=[x, 2.0])
        """),
        "other.py": CLEAN_RUN,  # `import sim`: no sim.py beside it; not the kernel
    }
    result = compute_edits(sources, [finding("WF401", "pkg/kernels.py", 7)])
    assert result.skipped == []
    assert sorted(result.new_sources) == ["main.py", "pkg/kernels.py"]
    assert result.new_sources["main.py"].count("outputs=[x_out") == 2


def test_untaped_finding_gets_no_edit() -> None:
    code = "d = wp.sqrt(wp.dot(v, v))\n"
    result = compute_edits({"m.py": code}, [finding("WF702", "m.py", 1, taped=False)])
    assert result.new_sources == {}
    assert result.skipped[0][1] == "no tape records this code"
    assert compute_edits({"m.py": code}, [finding("WF702", "m.py", 1, taped=True)]).new_sources


def test_struct_field_store_gets_an_output_and_a_new_struct_at_the_launch() -> None:
    code = src("""
        @wp.struct
        class Balls:
            q: wp.array(dtype=float)
            v: wp.array(dtype=float)


        @wp.kernel
        def floor_contact(s: Balls):
            i = wp.tid()
            if s.q[i] < 0.0:
                s.q[i] = 0.0


        def step(make):
            nxt = make()
            with wp.Tape() as tape:
                wp.launch(floor_contact, dim=4, inputs=[nxt])
            return nxt
    """)
    result = compute_edits({"m.py": code}, [finding("WF107", "m.py", 11, kernel="floor_contact", param="s.q")])
    assert result.skipped == []
    assert result.new_sources["m.py"].endswith(src("""
        def floor_contact(s: Balls, q_out: wp.array(dtype=float)):
            i = wp.tid()
            q_out[i] = s.q[i]
            if s.q[i] < 0.0:
                q_out[i] = 0.0


        def step(make):
            nxt = make()
            with wp.Tape() as tape:
                q_out = wp.empty_like(nxt.q)
                wp.launch(floor_contact, dim=4, inputs=[nxt], outputs=[q_out])
                nxt_new = Balls()
                nxt_new.q = q_out
                nxt_new.v = nxt.v
                nxt = nxt_new
            return nxt
    """))


def test_ping_pong_output_of_a_helper_is_returned_fresh() -> None:
    """WF104 with the span on a helper's launch: the fresh output reaches the caller's swap."""
    code = src("""
        def step(a, b):
            wp.launch(advance, dim=4, inputs=[a], outputs=[b])


        def run(a, b):
            with wp.Tape() as tape:
                for t in range(8):
                    step(a, b)
                    a, b = b, a
    """)
    result = compute_edits({"m.py": code}, [finding("WF104", "m.py", 2, arg="b")])
    assert result.skipped == []
    assert result.new_sources["m.py"] == src("""
        def step(a, b):
            b = wp.empty_like(b)
            wp.launch(advance, dim=4, inputs=[a], outputs=[b])
            return b


        def run(a, b):
            with wp.Tape() as tape:
                for t in range(8):
                    b = step(a, b)
                    a, b = b, a
    """)


_REPEAT = '''import warp as wp


@wp.kernel
def step(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i])


class State:
    def __init__(self):
        self.q = wp.zeros(4, dtype=float, requires_grad=True)


loss = wp.zeros(1, dtype=float, requires_grad=True)
SLOTS
tape = wp.Tape()
with tape:
    for t in range(3):
        wp.launch(step, dim=4, inputs=[states[t].q], outputs=[states[t + 1].q])
tape.backward(grads={states[3].q: wp.ones(4, dtype=float)})
'''


@pytest.mark.parametrize(
    ("slots", "safety", "fixed"),
    [
        ("states = [State()] * 4", "safe", "states = [State() for _ in range(4)]"),
        ("states = [wp.zeros(4, dtype=float, requires_grad=True)] * 4", "safe",
         "states = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(4)]"),
        ("s = State()\nstates = [s] * 4", "none", None),
        ("states = [load_state('x.npz')] * 4", "none", None),
        # a comprehension over one existing object: every slot is that object too
        ("s = State()\nstates = [s for _ in range(4)]", "none", None),
    ],
)
def test_list_repeat_is_fixed_only_for_an_allocating_call(slots: str, safety: str, fixed: str | None) -> None:
    """`[make()] * n` (WF103): one `make()` per slot when the call only allocates; an existing object or an
    opaque call (it may read a file, draw random numbers) gets no automatic fix."""
    from warpfix.engine import check_sources

    code = _REPEAT.replace("SLOTS", slots)
    found = [f for f in check_sources({"main.py": code}).findings if f.rule == "WF103"]
    assert len(found) == 1, [(f.rule, f.line) for f in found]
    assert found[0].fix.safety.value == safety
    result = compute_edits({"main.py": code}, found)
    if fixed is None:
        assert not result.new_sources and result.skipped
    else:
        assert result.new_sources == {"main.py": code.replace(slots, fixed)}



@pytest.mark.parametrize("slots", [
    "states = [State() for _ in range(4)]",  # one object per slot
    "bufs = [State() for _ in range(4)]\nstates = [b for b in bufs]",  # the slot depends on the loop variable
])
def test_a_comprehension_that_makes_or_picks_one_object_per_slot_is_no_list_alias(slots: str) -> None:
    from warpfix.engine import check_sources

    code = _REPEAT.replace("SLOTS", slots)
    assert [f.rule for f in check_sources({"main.py": code}).findings if f.rule in ("WF103", "WF104")] == []


_SCRATCH = """import warp as wp


@wp.kernel
def step(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i])


xs = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(4)]
scratch = wp.zeros(4, dtype=float, requires_grad=True)
tmp = [scratch for _ in range(3)]
tape = wp.Tape()
with tape:
    for t in range(3):
        wp.launch(step, dim=4, inputs=[xs[t]], outputs=[tmp[t]])
        wp.launch(step, dim=4, inputs=[tmp[t]], outputs=[xs[t + 1]])
tape.backward(grads={xs[3]: wp.ones(4, dtype=float)})
"""


@pytest.mark.parametrize(("tail", "safety"), [("", "safe"), ("print(scratch.numpy())\n", "none")])
def test_a_scratch_buffer_repeated_by_a_comprehension_is_allocated_once_per_slot(tail: str, safety: str) -> None:
    """`scratch = wp.zeros(...)`; `[scratch for _ in range(n)]` (WF103, at the comprehension): the allocation
    moves into the comprehension when nothing else uses `scratch`; a later read of it keeps it (no fix)."""
    from warpfix.engine import check_sources

    code = _SCRATCH + tail
    found = [f for f in check_sources({"main.py": code}).findings if f.rule in ("WF103", "WF104")]
    assert [(f.rule, f.line) for f in found] == [("WF103", 12)]
    assert found[0].fix.safety.value == safety
    result = compute_edits({"main.py": code}, found)
    if safety == "none":
        assert not result.new_sources
    else:
        assert result.new_sources == {"main.py": code.replace(
            "scratch = wp.zeros(4, dtype=float, requires_grad=True)\ntmp = [scratch for _ in range(3)]\n",
            "tmp = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(3)]\n")}


STORE_THEN_SCALE = src("""
    import warp as wp


    @wp.kernel
    def motor(c: wp.array(dtype=float), gains: wp.array(dtype=float), torques: wp.array(dtype=float)):
        i = wp.tid()
        action = c[i] * 0.5
        torques[i] = gains[i]
        torques[i] *= action + c[i]
""")
LAUNCHES_MOTOR = src("""
    import warp as wp

    from kernels import motor


    def run(c, gains, torques, n):
        with wp.Tape():
            wp.launch(motor, dim=n, inputs=[c, gains], outputs=[torques])
""")


def test_a_store_right_before_the_in_place_multiply_folds_into_one_store() -> None:
    result = compute_edits({"kernels.py": STORE_THEN_SCALE, "main.py": LAUNCHES_MOTOR},
                           [finding("WF401", "kernels.py", 9, column=5)])
    assert result.skipped == []
    assert set(result.new_sources) == {"kernels.py"}  # the launches stay as they are
    assert result.new_sources["kernels.py"] == STORE_THEN_SCALE.replace(
        "    torques[i] = gains[i]\n    torques[i] *= action + c[i]\n", "    torques[i] = gains[i] * (action + c[i])\n"
    )
    assert "folded into the store before it" in result.note(result.applied[0])


@pytest.mark.parametrize("first, second, why", [
    # a bare literal may not have the array's type
    ("torques[i] = 2.0", "torques[i] *= action", "a store of torques is a bare literal"),
    ("torques[i + 1] = gains[i]", "torques[i] *= action", "the accesses of torques use different indices"),
])
def test_a_store_that_cannot_fold_nor_stay_in_a_local_is_refused(first: str, second: str, why: str) -> None:
    kernels = STORE_THEN_SCALE.replace("torques[i] = gains[i]", first).replace("torques[i] *= action + c[i]", second)
    result = compute_edits({"kernels.py": kernels, "main.py": LAUNCHES_MOTOR}, [finding("WF401", "kernels.py", 9)])
    assert result.new_sources == {}
    assert f"torques is also written at line 8; nor can it be kept in a local: {why}" in result.skipped[0][1]


def test_a_store_whose_factor_reads_the_array_keeps_the_element_in_a_local() -> None:
    """``t[i] = g; t[i] *= t[i]`` cannot fold (the factor reads the array): the element lives in a local, stored
    once at the end, and no launch changes."""
    kernels = STORE_THEN_SCALE.replace("torques[i] *= action + c[i]", "torques[i] *= torques[i]")
    result = compute_edits({"kernels.py": kernels, "main.py": LAUNCHES_MOTOR}, [finding("WF401", "kernels.py", 9)])
    assert set(result.new_sources) == {"kernels.py"}
    assert result.new_sources["kernels.py"] == kernels.replace(
        "    torques[i] = gains[i]\n    torques[i] *= torques[i]\n",
        "    torques_local = gains[i]\n    torques_local *= torques_local\n    torques[i] = torques_local\n",
    )
    assert "kept in a local: the 2 stores and 1 reads of `torques[i]` use `torques_local`" in result.note(
        result.applied[0])


KEEP_IN_LOCAL = src("""
    import warp as wp


    @wp.struct
    class Particles:
        x: wp.array(dtype=wp.vec3)
        v: wp.array(dtype=wp.vec3)


    @wp.kernel
    def integrate(p: Particles, w: wp.array(dtype=float), dt: float, nxt: Particles):
        i = wp.tid()
        nxt.v[i] = p.v[i]
        if w[i] > 0.0:
            nxt.v[i] = p.v[i] + dt * wp.vec3(0.0, -9.8, 0.0)
            nxt.v[i] = nxt.v[i] / (1.0 + dt * wp.length(nxt.v[i]))
        nxt.x[i] = p.x[i] + dt * nxt.v[i]
""")


@pytest.mark.parametrize("change, why", [
    ("", None),
    ("    nxt.v[i] = p.v[i]\n    if", "    nxt.v[i] = nxt.v[i] + p.v[i]\n    if"),
    ("    i = wp.tid()\n", "    i = wp.tid()\n    if w[i] < 0.0:\n        return\n"),
    ("        nxt.v[i] = p.v[i] + dt", "        for k in range(2):\n            nxt.v[i] = p.v[i] + dt"),
])
def test_struct_field_written_in_steps_is_kept_in_a_local(change: str, why: str | None) -> None:
    """WF107 in the shape of a hand-written integrator: the field's element is computed in steps under an ``if``
    and read back; it lives in a local instead (the same values), unless the kernel reads what the array held,
    returns early, or writes it in a loop."""
    kernels = KEEP_IN_LOCAL if not change else KEEP_IN_LOCAL.replace(change, why)
    line = next(n for n, t in enumerate(kernels.splitlines(), 1) if "nxt.v[i] = nxt.v[i] / (1.0" in t)
    result = compute_edits({"kernels.py": kernels}, [finding("WF107", "kernels.py", line)])
    if change:
        assert result.new_sources == {}
        assert "nor can it be kept in a local" in result.skipped[0][1]
        return
    assert result.new_sources["kernels.py"] == kernels.replace("nxt.v[i] = p.v", "v_local = p.v").replace(
        "nxt.v[i] = nxt.v[i] / (1.0 + dt * wp.length(nxt.v[i]))", "v_local = v_local / (1.0 + dt * wp.length(v_local))"
    ).replace("dt * nxt.v[i]\n", "dt * v_local\n    nxt.v[i] = v_local\n")


ROTATED = src("""
    import warp as wp


    class Example:
        def __init__(self, n):
            self.states = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(n + 1)]
            self.states = [self.states[0]] + [self.states[1 + i % 2] for i in range(len(self.states) - 1)]

        def simulate(self, t):
            wp.launch(step, dim=4, inputs=[self.states[t]], outputs=[self.states[t + 1]])
""")


def test_a_state_list_rotated_through_its_own_slots_gets_fresh_slots() -> None:
    result = compute_edits({"m.py": ROTATED}, [finding("WF104", "m.py", 11, arg="self.states[t + 1]")])
    assert result.skipped == []
    assert result.new_sources["m.py"] == ROTATED.replace(
        "[self.states[1 + i % 2] for i in", "[wp.zeros(4, dtype=float, requires_grad=True) for i in")
    assert "fresh rotated slots" in result.note(result.applied[0])


def test_a_rotated_list_without_a_constructor_is_refused() -> None:
    code = ROTATED.replace("[wp.zeros(4, dtype=float, requires_grad=True) for _ in range(n + 1)]", "list(given)")
    result = compute_edits({"m.py": code}, [finding("WF104", "m.py", 11, arg="self.states[t + 1]")])
    assert result.new_sources == {}
    assert "no constructor call builds its slots" in result.skipped[0][1]


def test_two_rules_asking_one_codemod_the_same_share_its_edit() -> None:
    """WF303 and WF304 at a generator's ``yield`` ask the same move with the same data: the first makes the edit,
    the second is fixed by it (said so), not refused because its line moved."""
    text = src("""
        def optimize(bufs, iters):
            for it in range(iters):
                tape = wp.Tape()
                with tape:
                    rollout(bufs)
                yield it, float(bufs.loss.numpy()[0])
                tape.backward(bufs.loss)
                tape.zero()
    """)
    data = {"tape": "tape", "yield_line": 6, "backward_line": 7}
    result = compute_edits({"main.py": text}, [finding("WF303", "main.py", 6, column=9, **data),
                                              finding("WF304", "main.py", 6, column=9, **data)])
    assert [f.rule for f in result.applied] == ["WF303", "WF304"] and not result.skipped
    assert result.note(result.applied[1]) == "; the same edit as the WF303 fix at line 6"
    assert "        tape.backward(bufs.loss)\n        yield it" in result.new_sources["main.py"]
    other = compute_edits({"main.py": text}, [finding("WF303", "main.py", 6, column=9, written="x", **data),
                                              finding("WF304", "main.py", 6, column=9, **data)])
    assert len(other.applied) == 1  # asked otherwise: judged on its own
