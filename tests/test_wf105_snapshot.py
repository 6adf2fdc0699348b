"""WF105 under graph capture (issue 10): where ``x = wp.zeros_like(x)`` cannot be used (a capture runs
the reset: a replay never reruns the rebinding), each reader of the destroyed values reads a recorded
copy, ``inputs=[wp.clone(x), ...]``, and the reset stays. The rule offers it only when it is exact
(``warpfix.model.reset_era``); the codemod refuses with the reason otherwise. The slow tests run the
programs: the snapshot's gradients are the fresh array's where the rule offers it, under a CPU graph
too, and differ from them in the shape it refuses (newton's drone: a read every tick)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from warpfix.engine import check_sources
from warpfix.fixes import compute_edits

HEAD = textwrap.dedent("""\
    import sys

    import numpy as np
    import warp as wp


    @wp.kernel
    def scale(a: wp.array(dtype=float), x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = a[i] * a[i]


    @wp.kernel
    def square_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        d = x[i] - 1.0
        wp.atomic_add(loss, 0, d * d)


    class Sim:
        def __init__(self, capture):
            self.a = wp.array(np.linspace(0.5, 1.5, 8), dtype=float, requires_grad=True)
            self.x = wp.zeros(8, dtype=float, requires_grad=True)
            self.loss = wp.zeros(1, dtype=float, requires_grad=True)
            self.graph = None
            if capture:
                with wp.ScopedCapture() as cap:
                    self.run()
                self.graph = cap.graph

        def run(self):
            self.tape = wp.Tape()
            with self.tape:
                self.forward()
            self.tape.backward(self.loss)
""")
ONCE = HEAD + textwrap.indent(textwrap.dedent("""\

        def forward(self):
            self.loss.zero_()
            wp.launch(scale, dim=8, inputs=[self.a], outputs=[self.x])
            wp.launch(square_sum, dim=8, inputs=[self.x], outputs=[self.loss])
            self.x.zero_()
"""), "    ")
RESET, READ = 41, 40  # the lines of `self.x.zero_()` and its reader in ONCE
# newton's drone: a method run every tick reads the array, then resets it; the next tick reads it again
TICKS = HEAD + textwrap.indent(textwrap.dedent("""\

        def forward(self):
            self.loss.zero_()
            wp.launch(scale, dim=8, inputs=[self.a], outputs=[self.x])
            for _ in range(3):
                self.tick()

        def tick(self):
            wp.launch(square_sum, dim=8, inputs=[self.x], outputs=[self.loss])
            self.x.zero_()
"""), "    ")
MAIN = textwrap.dedent("""\


    if __name__ == "__main__":
        sim = Sim(capture="--capture" in sys.argv)
        for _ in range(2):  # the second iteration replays the graph (or reruns the step eagerly)
            if sim.graph is not None:
                wp.capture_launch(sim.graph)
            else:
                sim.run()
            grad = sim.a.grad.numpy().tolist()
            sim.tape.zero()
        print(f"loss = {sim.loss.numpy()[0]!r}")
        print(f"grad = {grad!r}")
""")


def _finding(sources: dict[str, str]):
    [f] = [f for f in check_sources(sources, select=["WF105"]).findings if f.rule == "WF105"]
    return f


def test_the_readers_are_given_when_the_snapshot_is_exact() -> None:
    f = _finding({"sim.py": ONCE})
    assert (f.line, f.data.get("snapshot")) == (RESET, [["sim.py", READ, "self.x"]])


def test_a_read_after_the_reset_refuses_the_snapshot() -> None:
    """Every tick's read lands in the one ``x.grad``: the reads before a reset and after it would share it."""
    f = _finding({"sim.py": TICKS})
    assert "snapshot" not in f.data
    assert "touches `self.x` again after the reset (line 44)" in f.data["snapshot_refused"]


def test_a_reader_that_is_no_project_launch_refuses_the_snapshot() -> None:
    code = ONCE.replace("wp.launch(square_sum, dim=8, inputs=[self.x], outputs=[self.loss])\n",
                        "wp.launch(square_sum, dim=8, inputs=[self.x], outputs=[self.loss])\n"
                        "        log_values(self.x)\n")
    f = _finding({"sim.py": code})
    assert "snapshot" not in f.data
    assert "accesses `self.x` on the tape other than by a launch" in f.data["snapshot_refused"]


def test_an_array_no_recorded_store_writes_refuses_the_snapshot() -> None:
    """A leaf keeps the gradient of earlier backwards until it is zeroed, and ``wp.clone`` copies it."""
    leaf = ONCE.replace("        wp.launch(scale, dim=8, inputs=[self.a], outputs=[self.x])\n", "")
    f = _finding({"sim.py": leaf})
    assert "snapshot" not in f.data
    assert "no recorded store writes `self.x` on the tape before it is read" in f.data["snapshot_refused"]


def test_a_reader_launch_that_also_reads_a_leaf_refuses_the_snapshot() -> None:
    """The edit changes the launch for every run of it: one on a leaf would count its gradient twice."""
    helper = ONCE.replace("        wp.launch(square_sum, dim=8, inputs=[self.x], outputs=[self.loss])\n",
                          "        self.score(self.x)\n        self.score(self.a)\n")
    helper += textwrap.indent(textwrap.dedent("""\

        def score(self, y):
            wp.launch(square_sum, dim=8, inputs=[y], outputs=[self.loss])
    """), "    ")
    f = _finding({"sim.py": helper})
    assert "snapshot" not in f.data
    assert "the launch at line 45 also runs (called at line 41) on an array no recorded store wrote" in f.data["snapshot_refused"]
    alone = helper.replace("        self.score(self.a)\n", "")
    assert _finding({"sim.py": alone}).data["snapshot"] == [["sim.py", 44, "y"]]


def test_only_copies_read_before_the_reset_is_no_hazard() -> None:
    fixed = ONCE.replace("inputs=[self.x], outputs=[self.loss]", "inputs=[wp.clone(self.x)], outputs=[self.loss]")
    assert [f for f in check_sources({"sim.py": fixed}).findings if f.rule == "WF105"] == []
    # ... but a copy read followed by a launch reading the zeroed array is (the two share x.grad)
    later = fixed.replace("        self.x.zero_()\n",
                          "        self.x.zero_()\n"
                          "        wp.launch(square_sum, dim=8, inputs=[self.x], outputs=[self.loss])\n")
    assert [f.line for f in check_sources({"sim.py": later}).findings if f.rule == "WF105"] == [RESET]


def test_apply_snapshots_the_read_in_captured_code_and_names_the_strategy() -> None:
    sources = {"sim.py": ONCE}
    f = _finding(sources)
    result = compute_edits(sources, [f])
    assert result.skipped == []
    new = result.new_sources["sim.py"]
    assert new == ONCE.replace("inputs=[self.x], outputs=[self.loss]", "inputs=[wp.clone(self.x)], outputs=[self.loss]")
    assert result.note(f).startswith("; snapshot the read: the launch(es) at line(s) 40")
    assert [g for g in check_sources({"sim.py": new}).findings if g.rule == "WF105"] == []


def test_the_fresh_array_comes_first_where_it_can_be_rebound() -> None:
    eager = ONCE.replace("        self.x.zero_()\n", "        x = self.x\n        x.zero_()\n")
    sources = {"sim.py": eager}
    f = _finding(sources)
    assert f.data.get("snapshot")
    result = compute_edits(sources, [f])
    assert "        x = wp.zeros_like(x)\n" in result.new_sources["sim.py"]
    assert "wp.clone" not in result.new_sources["sim.py"]


def test_apply_refuses_the_drone_shape_with_both_reasons() -> None:
    sources = {"sim.py": TICKS}
    result = compute_edits(sources, [_finding(sources)])
    assert result.new_sources == {}
    [(_, why)] = result.skipped
    assert "cannot rebind self.x" in why
    assert "reading a snapshot instead does not apply: the tape touches `self.x` again after the reset" in why


@pytest.mark.parametrize(("site", "why"), [
    (["main.py", READ, "self.x"], "the reader at main.py:40 is in another file"),
    (["sim.py", READ, "self.y"], "`self.y` is not among the `inputs` of the reader at sim.py:40"),
    (["sim.py", READ - 2, "self.x"], "no single `wp.launch` at the reader at sim.py:38"),
])
def test_apply_refuses_a_reader_it_cannot_match(site: list, why: str) -> None:
    sources = {"sim.py": ONCE}
    f = _finding(sources)
    f.data["snapshot"] = [site]
    result = compute_edits(sources, [f])
    assert result.new_sources == {}
    [(_, reason)] = result.skipped
    assert why in reason


def test_apply_refuses_inputs_that_are_no_list() -> None:
    sources = {"sim.py": ONCE.replace("inputs=[self.x], outputs=[self.loss]", "inputs=self.args, outputs=[self.loss]")}
    f = _finding({"sim.py": ONCE})
    result = compute_edits(sources, [f])
    [(_, reason)] = result.skipped
    assert "the reader at sim.py:40 does not pass `inputs` as a list" in reason


def _run(tmp_path, code: str, *flags: str) -> tuple[str, str]:
    path = tmp_path / "sim.py"
    path.write_text(code + MAIN)
    out = subprocess.run([sys.executable, str(path), *flags], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, check=True).stdout
    lines = dict(line.split(" = ", 1) for line in out.splitlines() if " = " in line)
    return lines["loss"], lines["grad"]


def _fresh(code: str) -> str:
    return code.replace("        self.x.zero_()\n", "        self.x = wp.zeros_like(self.x)\n")


def _snapshot(code: str) -> str:
    return code.replace("inputs=[self.x], outputs=[self.loss]", "inputs=[wp.clone(self.x)], outputs=[self.loss]")


@pytest.mark.slow
def test_the_snapshot_has_the_fresh_arrays_gradients_where_it_is_offered(tmp_path) -> None:
    """d/da sum((a*a - 1)^2) = 4 a (a*a - 1): the fresh array (eager) and the snapshot (eager, and replayed from a CPU
    graph) give it; the buggy reset gives 0 (-4 a: the loss's adjoint replays against zeros). Same losses."""
    fresh = _run(tmp_path, _fresh(ONCE))
    assert _run(tmp_path, _snapshot(ONCE)) == fresh
    assert _run(tmp_path, _snapshot(ONCE), "--capture") == fresh
    buggy = _run(tmp_path, ONCE)
    assert buggy[0] == fresh[0] and buggy[1] != fresh[1]


@pytest.mark.slow
def test_the_snapshot_is_wrong_where_it_is_refused(tmp_path) -> None:
    """The drone shape: the snapshot gives ``a`` the gradient of every tick's read (the later ticks read
    zeros that do not depend on ``a``), the fresh array only that of the first tick."""
    fresh = _run(tmp_path, _fresh(TICKS))
    snapshot = _run(tmp_path, _snapshot(TICKS))
    assert snapshot[0] == fresh[0] and snapshot[1] != fresh[1]


ACCUMULATE = textwrap.dedent("""\
    import numpy as np
    import warp as wp


    @wp.kernel
    def scale(a: wp.array(dtype=float), x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = 2.0 * a[i]


    @wp.kernel
    def square_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, x[i] * x[i])


    a = wp.array(np.array([1.0, 2.0]), dtype=float, requires_grad=True)
    x = wp.zeros(2, dtype=float, requires_grad=True)
    for snapshot in (False, True):
        for leaf in (True, False):
            a.grad.zero_()
            x.grad.zero_()
            x.assign(np.array([1.0, 2.0]))
            for _ in range(2):  # two backwards, the gradients summed on purpose
                loss = wp.zeros(1, dtype=float, requires_grad=True)
                tape = wp.Tape()
                with tape:
                    if not leaf:
                        wp.launch(scale, dim=2, inputs=[a], outputs=[x])
                    wp.launch(square_sum, dim=2, inputs=[wp.clone(x) if snapshot else x], outputs=[loss])
                tape.backward(loss)
            print(f"{'leaf' if leaf else 'stored'} {snapshot} = {(x if leaf else a).grad.numpy().tolist()}")
""")


@pytest.mark.slow
def test_a_snapshot_counts_a_leafs_earlier_gradient_twice(tmp_path) -> None:
    """Why the snapshot needs a recorded store before the read: ``wp.clone`` copies ``x.grad`` into the
    copy's gradient, whose adjoint adds it back. A stored array's gradient is consumed by the store's
    adjoint at every backward; a leaf's sums over backwards, and the snapshot counts the earlier sum twice."""
    path = tmp_path / "acc.py"
    path.write_text(ACCUMULATE)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         check=True).stdout
    got = dict(line.split(" = ", 1) for line in out.splitlines() if " = " in line)
    assert got["stored True"] == got["stored False"]
    assert (got["leaf False"], got["leaf True"]) == ("[4.0, 8.0]", "[6.0, 12.0]")
