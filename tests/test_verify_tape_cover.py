"""The runtime WF601 check (warpfix/verify/tape_cover.py): a backward whose objective depends on a launch
recorded on another tape (discarded, reset, or backwarded on its own before) is reported at the launch,
one finding per launch; tapes that hand the gradient on (segments, a checkpointed custom backward) and a
tape reset between independent episodes are clean."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from warpfix.verify import run_verify
from warpfix.verify.fixable import runtime_fixes

PROGRAMS = Path(__file__).parent / "verify_programs"


def line_of(program: str, text: str) -> int:
    return next(i for i, line in enumerate((PROGRAMS / program).read_text().splitlines(), 1) if text in line)


def truncations(program: str, *args: str):
    report = run_verify([sys.executable, program, *args], cwd=str(PROGRAMS), timeout=120.0)
    assert report.error is None, report.error
    return report, [f for f in report.findings if f.data.get("runtime") == "tape-cover"]


def test_a_loss_that_depends_on_frames_recorded_on_discarded_tapes_is_reported_at_their_launch() -> None:
    report, [finding] = truncations("frame_tapes.py", "--per-frame")
    launch = line_of("frame_tapes.py", "wp.launch(step, dim=N")
    backward = f"frame_tapes.py:{line_of('frame_tapes.py', '            tape.backward(loss)')}"
    assert (finding.rule, finding.severity.value, finding.path, finding.line) == ("WF601", "error", "frame_tapes.py",
                                                                                  launch)
    assert finding.data["classified_as"] == "WF601" and finding.data["backward"] == backward
    assert "recorded on another tape, never backwarded" in finding.message and backward in finding.message
    # one finding for the launch: its 3 earlier frames (the last one is on the backward's tape) in 2 iterations
    assert finding.data["count"] == 6
    # the hoist needs the static model's frame loop: the runtime finding offers no fix of its own
    assert runtime_fixes(report.findings, str(PROGRAMS), {str(PROGRAMS / "frame_tapes.py"): ""}, []) == []


def test_a_state_carried_out_of_a_backwarded_window_by_an_unrecorded_clone_is_reported() -> None:
    """per_window.py: each window's tape is backwarded on its own, then the state is cloned outside any tape
    into the next window: the next backward stops at the clone of what the earlier window's launch wrote."""
    _, [finding] = truncations("per_window.py")
    assert (finding.rule, finding.line) == ("WF601", line_of("per_window.py", "wp.launch(step, dim=N"))
    assert "another tape, backwarded on its own before" in finding.message


@pytest.mark.parametrize("args", [(), ("--segments",), ("--checkpoint",), ("--reset",)],
                         ids=["one-tape", "segments-seeded-in-reverse", "checkpointed-custom-backward",
                              "reset-between-independent-episodes"])
def test_tapes_that_cover_the_objective_are_clean(args: tuple[str, ...]) -> None:
    """`--segments`: the first segment's tape is backwarded after the second, seeded with the boundary
    gradients (a link found at the second backward is covered by the later one); `--checkpoint`: the
    frames run on no tape, a ``record_func`` adjoint on the tape replays them; `--reset`: the second
    episode's loss depends only on its own recording (the latest writer of each array, not any earlier one).
    FD agrees at every backward too: with segments, each backward of the stiffness every segment reads is
    judged on its own segment's share (FD perturbs it from its tape's first read), the seeded ones adding the
    rest; judged on the whole loss, the last segment's backward failed at 0.3x."""
    report, found = truncations("frame_tapes.py", *args)
    assert found == []
    assert [p.verdict for b in report.backwards for p in b.params] == ["pass"] * len(report.backwards)
    assert not [f for f in report.findings if f.rule == "WF901"]


@pytest.mark.slow  # two verify runs of Warp's navier_stokes example: ~2 min on the shared machine
@pytest.mark.parametrize("mutated", [True, False], ids=["per-frame-tape", "unmodified"])
def test_navier_stokes_per_frame_tapes(tmp_path: Path, mutated: bool) -> None:
    """The benchmark's navier_stokes per-frame-tape mutant (site 1: a new tape per step of ``forward``, the
    backward after the loop) truncates the objective at every launch of the earlier steps, each reported once
    at its line (and kernel) with that backward; the unmodified example (one tape) has none."""
    from bench.mutants.operators import BY_NAME as OPERATORS  # noqa: PLC0415 - libcst, the bench's
    from bench.mutants.programs import BY_NAME as BENCH_PROGRAMS  # noqa: PLC0415

    prog = BENCH_PROGRAMS["navier_stokes"]
    if not prog.source.exists():
        pytest.skip(f"{prog.source} is not installed")
    source = prog.source.read_text(encoding="utf-8")
    mutant = OPERATORS["per-frame-tape"].mutate(source, 1)
    assert mutant is not None
    (tmp_path / prog.source.name).write_text(mutant.code if mutated else source, encoding="utf-8")
    report = run_verify([sys.executable, prog.source.name, *prog.args], cwd=str(tmp_path), timeout=300.0)
    found = [f for f in report.findings if f.data.get("runtime") == "tape-cover"]
    if not mutated:
        assert report.error is None, report.error
        assert found == []
        return
    lines = mutant.code.splitlines()
    backward = next(n for n, text in enumerate(lines, 1) if n > mutant.line and ".backward(" in text)
    assert found and {f.data["backward"] for f in found} == {f"{prog.source.name}:{backward}"}
    # one finding per launch (a helper's line that launches the kernel it is passed: one per kernel)
    assert len({(f.path, f.line, f.data["family"]) for f in found}) == len(found)
    for f in found:
        assert f.data["classified_as"] == "WF601" and "never backwarded" in f.message
        assert lines[f.line - 1].lstrip().startswith(("wp.launch(", "wp.launch_tiled(", "wp.copy(")), lines[f.line - 1]


def _segment_jobs(seed_at: str, earlier_tape: str | None, later_how: str = "grads="):
    """A loss backward of tape B whose leaf ``k`` was first read at op 0 on ``earlier_tape``, B reading it
    at op 2 (and the boundary ``x1`` at op 2), then a later backward of tape A seeded at ``seed_at``."""
    from types import SimpleNamespace as NS

    from warpfix.verify.replay_holds import hold_completed_segments

    tapes = {"A": object(), "B": object(), None: None}
    k, x1, other = (NS(order=i, arr=object()) for i in range(3))
    ops = [NS(reads=[k], tape=tapes[earlier_tape]), NS(reads=[], tape=tapes[earlier_tape]),
           NS(reads=[k, x1], tape=tapes["B"])]
    plan = NS(start=0, n_ops=3, leaves_at={0: [k]})
    job = NS(tape=tapes["B"], objective=NS(how="loss", seeds=[]), plan=plan, tape_reads={0: 2, 1: 2}, notes={})
    seeds = [({"x1": x1, "other": other}[seed_at].arr, None)]
    later = NS(tape=tapes["A"], objective=NS(how=later_how, seeds=seeds))
    hold_completed_segments(ops, job, [later])
    return {at: [i.order for i in leaves] for at, leaves in plan.leaves_at.items()}


def test_fd_holds_earlier_segments_only_when_a_later_backward_seeds_them_at_the_boundary() -> None:
    assert _segment_jobs("x1", "A") == {2: [0]}  # a segment boundary: judged on this segment's share
    assert _segment_jobs("other", "A") == {0: [0]}  # seeded elsewhere: the whole loss, as before
    assert _segment_jobs("x1", None) == {0: [0]}  # an earlier read on no tape: its path stays in
    assert _segment_jobs("x1", "A", later_how="loss") == {0: [0]}  # not a seeded backward
