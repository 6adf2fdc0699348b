"""End-to-end tests of `warpfix verify`: real Warp programs (tests/verify_programs/) under the probe."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warpfix.verify import VerifyReport, run_verify
from warpfix.verify.fd import FD_BUDGET_S

PROGRAMS = Path(__file__).parent / "verify_programs"
REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def verify(*cmd: str, timeout: float = 120.0) -> VerifyReport:
    return run_verify(list(cmd), cwd=str(PROGRAMS), timeout=timeout)


def line_of(path: str, text: str) -> int:
    """The 1-based line of ``path`` (under verify_programs/) that contains ``text``."""
    lines = (PROGRAMS / path).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def params(report: VerifyReport) -> dict[str, tuple[str, str]]:
    """name -> (verdict, signature) of the first backward's parameters, later backwards overriding."""
    out: dict[str, tuple[str, str]] = {}
    for b in report.backwards:
        for p in b.params:
            if out.get(p.name, ("",))[0] != "fail":
                out[p.name] = (p.verdict, p.signature)
    return out


def rules(report: VerifyReport) -> set[str]:
    return {f.rule for f in report.findings}


@pytest.mark.parametrize(
    "cmd",
    [
        ("python", "spring_ok.py"),
        ("python", "-m", "springs.train"),
        ("python", "per_window.py", "--hoisted"),
        ("python", "stochastic.py"),
    ],
    ids=["single-file", "multi-file-module", "hoisted-window-loop", "stochastic-pinned-seed"],
)
def test_correct_programs_pass(cmd):
    report = verify(*cmd)
    assert report.error is None, report.error
    verdicts = params(report)
    assert verdicts and all(v == ("pass", "") for v in verdicts.values()), verdicts
    assert not rules(report) - {"WF904"}
    assert report.exit_code == 0


def test_missing_requires_grad_is_all_zero():
    report = verify("python", "-m", "springs.train", "--bug", "no-grad")
    assert params(report)["k"] == ("fail", "all-zero")
    assert "WF901" in rules(report)
    assert report.exit_code == 1


def test_stochastic_forward_bug_found_with_pinned_seed():
    report = verify("python", "stochastic.py", "--bug")
    assert params(report)["theta"] == ("fail", "all-zero")


def test_in_tape_overwrite_fails_and_is_traced_to_the_writer():
    report = verify("python", "-m", "springs.train", "--bug", "overwrite")
    assert any(v == "fail" for v, _ in params(report).values())
    wf902 = [f for f in report.findings if f.rule == "WF902"]
    assert wf902 and wf902[0].path == "springs/train.py"
    assert wf902[0].line == line_of("springs/train.py", "wp.launch(forces,")
    assert "WF905" in rules(report)


def test_per_window_tape_fails_across_windows_only():
    report = verify("python", "per_window.py")
    for window in (0, 1):  # both traced iterations show it
        backwards = [b for b in report.backwards if b.window == window]
        assert len(backwards) == 3
        first = {p.name: p.verdict for p in backwards[0].params}
        assert first["k"] == "pass"
        later = [p for p in backwards[1].params if p.name == "k"]
        assert later[0].verdict == "fail" and later[0].signature == "cross-window"
    assert report.exit_code == 1


def test_bug_dormant_at_iteration_0_is_found_in_the_next_iteration():
    report = verify("python", "dormant_alias.py")
    by_window = {b.window: {p.name: p.verdict for p in b.params} for b in report.backwards}
    assert set(by_window[0].values()) == {"pass"}
    assert by_window[1]["k"] == "fail"
    assert {f.data["array"] for f in report.findings if f.rule == "WF902"} == {"xs[0]", "vs[0]"}
    fixed = verify("python", "dormant_alias.py", "--fixed")
    assert fixed.exit_code == 0 and len(fixed.backwards) == 2 and not fixed.findings


def test_missing_tape_zero_is_wf903():
    report = verify("python", "missing_zero.py")
    wf903 = [f for f in report.findings if f.rule == "WF903"]
    # at the next backward (k.grad non-zero when it starts), and at the read of the summed gradient
    assert [(f.line, f.data["array"]) for f in wf903] == [
        (line_of("missing_zero.py", "tape.backward(loss)"), "k"),
        (line_of("missing_zero.py", "inputs=[k, k.grad, 0.05]"), "k")]
    assert {f.data["classified_as"] for f in wf903} == {"WF301"}  # the static rule whose codemod inserts tape.zero()
    assert report.exit_code == 1


@pytest.mark.parametrize(("flag", "second"), [("--reset", "pass"), ("", "fail")], ids=["reset", "re-recorded"])
def test_an_update_through_numpy_ends_the_first_iteration(flag, second):
    """`wp.array(x.grad.numpy() * s)` fed to the optimizer launch is gradient data: the window ends at that
    update, and the next iteration's backward is checked (a tape re-entered without reset doubles it)."""
    report = verify("python", "host_update.py", *([flag] if flag else []))
    assert report.error is None, report.error
    verdicts = [(b.window, [p.verdict for p in b.params]) for b in report.backwards]
    assert verdicts == [(0, ["pass"]), (1, [second])], verdicts
    if second == "fail":
        assert "2x" in next(f.message for f in report.findings if f.rule == "WF901")


def test_write_before_backward_is_wf902():
    report = verify("python", "reset_before_backward.py")
    wf902 = [f for f in report.findings if f.rule == "WF902"]
    assert wf902 and all(f.line == line_of("reset_before_backward.py", "].assign(x0)") for f in wf902)
    assert "fail" in {v for v, _ in params(report).values()}


def test_wrong_custom_adjoint_is_wf804_with_factor():
    report = verify("python", "-m", "springs.train", "--bug", "adjoint")
    wf804 = [f for f in report.findings if f.rule == "WF804"]
    assert len(wf804) == 1
    assert wf804[0].path == "springs/sim.py"
    assert wf804[0].data["function"] == "drag_bad"
    assert wf804[0].data["factor"] == pytest.approx(2.0, rel=0.02)
    assert report.exit_code == 1


def test_float32_cancellation_is_unreliable_not_fail():
    report = verify("python", "cancellation.py")
    p = report.backwards[0].params[0]
    assert (p.name, p.verdict) == ("gain", "unreliable")
    assert p.reason.startswith("cancellation")
    assert rules(report) == {"WF904"}
    assert report.exit_code == 0


def test_unpinnable_host_noise_is_unreliable_not_fail():
    report = verify("python", "host_noise.py")
    p = report.backwards[0].params[0]
    assert (p.name, p.verdict) == ("theta", "unreliable")
    assert p.reason.startswith("noise: replaying the iteration gives loss")
    wf902 = [f for f in report.findings if f.rule == "WF902"]
    assert [f.data["array"] for f in wf902] == ["noise"]
    # FD cannot judge this backward, so nothing confirms the overwrite reaches the gradient: a warning
    assert [f.severity.value for f in wf902] == ["warning"] and "FD cannot judge" in wf902[0].message


def test_host_read_of_a_parameter_is_reported():
    report = verify("python", "host_read.py")
    p = report.backwards[0].params[0]
    assert (p.name, p.verdict) == ("k", "pass")
    assert f"reads `k` on the host at host_read.py:{line_of('host_read.py', 'k.numpy()))')}" in p.reason


def test_chaotic_program_is_unreliable_not_fail():
    report = verify("python", "chaotic.py")
    verdicts = params(report)
    assert verdicts and all(v == "unreliable" for v, _ in verdicts.values())
    assert all(p.reason.startswith("chaos") for b in report.backwards for p in b.params)


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("crash.py", "the program crashed: RuntimeError: simulated failure"),
        ("no_backward.py", "the program finished without calling tape.backward"),
    ],
)
def test_programs_that_cannot_be_verified_exit_2(script, message):
    report = verify("python", script)
    assert report.exit_code == 2
    assert report.error is not None and message in report.error


def test_backward_seeded_with_grads_is_judged_on_the_seeded_objective():
    report = verify("python", "no_loss.py")
    assert report.exit_code == 0, report.error
    (b,) = report.backwards
    assert b.objective == "sum(seed * output) of the grads= seeds"
    assert b.loss == 8.0  # sum(1 * 2 * x) over 4 ones
    assert [(p.name, p.verdict) for p in b.params] == [("x", "pass")]


def test_hanging_program_is_killed_at_the_timeout():
    start = time.monotonic()
    report = verify("python", "hang.py", timeout=6.0)
    assert time.monotonic() - start < 15.0
    assert report.exit_code == 2
    assert "within 6 s" in (report.error or "")


def test_cli_json_output_and_exit_code():
    proc = subprocess.run(
        [sys.executable, "-m", "warpfix.verify", "--format", "json", "--", "python", "-m", "springs.train",
         "--bug", "no-grad"],
        cwd=PROGRAMS, capture_output=True, text=True, timeout=180,
        env={"PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(Path.home())},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["version"] == 1
    b = doc["backwards"][0]
    assert b["site"] == f"springs/train.py:{line_of('springs/train.py', 'tape.backward(loss)')}"
    assert isinstance(b["loss"], float)
    k = next(p for p in b["params"] if p["name"] == "k")
    assert {"name", "max_rel_err", "verdict", "signature"} <= set(k)
    assert (k["verdict"], k["signature"]) == ("fail", "all-zero")
    # every perturbation the verdict rests on, with its ladder, and the counts a reader audits it by
    samples = k["samples"]
    assert 0 < len(samples) <= k["counts"]["planned"]
    assert all(s["ad"] == 0.0 and s["kind"] in ("element", "direction") and len(s["steps"]) >= 2 for s in samples)
    assert {st: n for st, n in k["counts"].items() if st != "planned"} == {
        st: sum(s["status"] == st for s in samples) for st in {s["status"] for s in samples}
    }
    assert k["counts"].get("fail", 0) >= 1
    assert any(f["rule"] == "WF901" and f["path"] == "springs/train.py" for f in doc["findings"])



def test_struct_parameter_and_ptr_alias_write_before_backward():
    report = verify("python", "struct_alias.py")
    assert params(report)["model.k"][0] == "fail"
    wf902 = [f for f in report.findings if f.rule == "WF902"]
    assert [(f.line, f.data["array"]) for f in wf902] == [(line_of("struct_alias.py", "# clears"), "x1")]
    fixed = verify("python", "struct_alias.py", "--fixed")
    assert params(fixed) == {"model.k": ("pass", "")}  # x0 is a leaf the program does not train
    assert fixed.exit_code == 0 and not fixed.findings


def test_unknown_device_is_exit_2():
    report = run_verify(["python", "spring_ok.py"], cwd=str(PROGRAMS), device="cuda:99", timeout=60)
    assert report.exit_code == 2 and "cannot use device 'cuda:99'" in (report.error or "")


def test_cli_uses_the_entry_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.warpfix]\nentry = "python spring_ok.py"\ndevice = "cpu"\n')
    (tmp_path / "spring_ok.py").write_text((PROGRAMS / "spring_ok.py").read_text())
    sub = tmp_path / "src"
    sub.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "warpfix.verify", "--format", "json"],
        cwd=sub, capture_output=True, text=True, timeout=180,
        env={"PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(Path.home())},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["backwards"][0]["site"] == f"spring_ok.py:{line_of('spring_ok.py', 'tape.backward(loss)')}"


@pytest.mark.parametrize("mode", ["scan", "prepared", "freed-view", "pooled"])
def test_buffers_written_the_way_libraries_do_are_replayed_exactly(mode):
    # warp.fem / warp.optim shapes: a native scan, a prepared launch, a view of a freed temporary, a
    # pooled buffer lent again after its owner zeroed it (without the reset the replay reads stale contents)
    report = verify("python", "library_buffers.py", mode)
    assert report.error is None, report.error
    verdicts = [(p.verdict, p.reason) for b in report.backwards for p in b.params]
    assert len(verdicts) == 2 and all(v == "pass" for v, _ in verdicts), verdicts
    assert not rules(report)


def test_the_programs_own_sitecustomize_still_runs(tmp_path, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text('print("the program\'s own sitecustomize ran")\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    report = verify("python", "spring_ok.py")
    assert report.error is None, report.error
    assert "the program's own sitecustomize ran" in report.program_output
    assert "Error in sitecustomize" not in report.program_output


@pytest.mark.parametrize(("flag", "rule", "where"), [(None, "WF105", "inside"), ("--after", "WF303", "after")])
def test_zeroing_a_read_array_is_classified_by_where_it_runs(flag, rule, where):
    # inside the tape block: WF105 (zero-fill-read); after it, before the backward: WF303
    report = verify("python", "zero_read.py", *([flag] if flag else []))
    wf902 = [f for f in report.findings if f.rule == "WF902"]
    want = line_of("zero_read.py", f"a.zero_()  # {where} the tape block")
    assert [(f.line, f.data["classified_as"]) for f in wf902] == [(want, rule)], wf902


def test_the_fd_budget_floor_is_verify_s_default_or_what_the_command_line_gives() -> None:
    # spring_ok runs in about a second: twice its run time stays under either floor
    default = verify("python", "spring_ok.py")
    assert default.probe_seconds["fd_budget"] == pytest.approx(FD_BUDGET_S)
    out = subprocess.run(
        [sys.executable, "-m", "warpfix", "verify", "--fd-budget", "42", "--format", "json", "--", "python",
         "spring_ok.py"], cwd=PROGRAMS, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    given = json.loads(out.stdout)
    assert out.returncode == 0, out.stderr
    assert given["probe_seconds"]["fd_budget"] == pytest.approx(42.0)


def test_a_reset_after_a_copy_read_it_is_no_overwrite_the_backward_sees(tmp_path):
    """The copy's adjoint adds into the source's gradient without reading the source: resetting `x` after
    `wp.clone(x)` changes nothing the backward replays (a WF105 fix hands the reader a clone and keeps the
    reset). The reader reading `x` itself is the overwrite."""
    import shutil

    shutil.copy(Path(__file__).parent / "verify_programs" / "clone_then_reset.py", tmp_path / "prog.py")
    clean = run_verify([sys.executable, "prog.py"], cwd=str(tmp_path), timeout=120)
    assert "WF902" not in {f.rule for f in clean.findings}, [f.message for f in clean.findings]
    buggy = run_verify([sys.executable, "prog.py", "--bug"], cwd=str(tmp_path), timeout=120)
    assert "WF902" in {f.rule for f in buggy.findings}


def test_a_launch_reading_the_array_it_overwrites_is_an_integrity_finding_at_that_launch():
    """``inputs=[z], outputs=[z]``: the launch's own adjoint replays against what it wrote. The runtime check
    reports it at the launch, as WF106's shape, and not for the separate-output version."""
    report = verify("python", "inplace_activation.py")
    found = [f for f in report.findings if f.rule == "WF902"]
    assert found and {f.line for f in found} == {line_of("inplace_activation.py", "wp.launch(act,")}
    assert {f.data["classified_as"] for f in found} == {"WF106"}
    fixed = verify("python", "inplace_activation.py", "--fixed")
    assert [f for f in fixed.findings if f.rule == "WF902"] == []


def test_later_segments_that_read_none_of_the_parameters_are_the_same_iteration():
    """The parameter enters only in the first segment's set-up: the later segments' backwards (no leaf of their
    own) belong to the first iteration, which the runtime check then shows truncated across its tapes (WF601);
    the hoisted program's one backward of the running total is their sum, and passes."""
    report = verify("python", "setup_window.py")
    assert len([b for b in report.backwards if b.window == 0]) == 3
    assert "WF601" in rules(report)
    hoisted = verify("python", "setup_window.py", "--hoisted")
    assert "WF601" not in rules(hoisted) and all(p.verdict == "pass" for b in hoisted.backwards for p in b.params)


def test_a_host_update_of_a_parameter_behind_record_func_ends_the_iteration():
    """``thrust`` reaches the tape only through numpy and ``tape.record_func``: FD judges ``centered``, and the
    host update ``thrust.assign(thrust.numpy() - lr * thrust.grad.numpy())`` ends the first iteration."""
    report = verify("python", "record_func_update.py")
    assert report.error is None, report.error
    windows = [b.window for b in report.backwards]
    assert windows[:2] == [0, 1], windows
    assert params(report)["centered"][0] == "pass"


def test_an_input_the_custom_adjoint_never_writes_is_a_warning():
    """``wp.adjoint[r]`` only: FD of the forward in ``eps`` disagrees with the zero adjoint, but the adjoint never
    writes ``eps`` (a constant held on purpose), so WF804 is a warning and the gradient verdict stands."""
    report = verify("python", "smoothing_eps.py")
    assert report.error is None, report.error
    [found] = [f for f in report.findings if f.rule == "WF804"]
    assert found.severity.value == "warning" and "never writes the adjoint of `eps`" in found.message
    assert params(report)["x"][0] == "pass"


def test_slabs_of_one_history_array_touched_apart_are_no_overwrite():
    """``u[s_in, i, j]`` read and ``u[s_out, i, j]`` written through two arguments of one launch, the misfit reading
    the last slab while later windows write others: the runtime checks see slabs, not the whole array."""
    report = verify("python", "history_slabs.py")
    assert report.error is None, report.error
    assert not [f for f in report.findings if f.rule in ("WF902", "WF905")], [f.message for f in report.findings]
    assert params(report)["k"][0] == "pass"
