"""verify on programs shaped like real ones: graph capture, seeded backwards, the program's own
interpreter (a second venv without warpfix), a newton diffsim example."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from warpfix.verify import run_verify

PROGRAMS = Path(__file__).resolve().parent / "verify_programs"


def _verify(*args: str, cwd: Path = PROGRAMS, timeout: float = 300):
    return run_verify([sys.executable, *args], cwd=str(cwd), timeout=timeout)


def _other_venv(tmp_path: Path, with_warp: bool) -> Path:
    """A venv whose site-packages holds no warpfix: warp and numpy only, through a .pth file."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    if with_warp:
        purelib = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
        warp_site = Path(importlib.util.find_spec("warp").origin).parents[1]
        (purelib / "deps.pth").write_text(f"{warp_site}\n")
    return venv / "bin" / "python"


def test_interpreter_without_warp_is_one_line(tmp_path: Path) -> None:
    python = _other_venv(tmp_path, with_warp=False)
    (tmp_path / "prog.py").write_text("import warp\n")
    report = run_verify([str(python), "prog.py"], cwd=str(tmp_path), timeout=60)
    assert report.exit_code == 2
    assert report.error.startswith(f"the program's interpreter {python} cannot load the probe: ModuleNotFoundError")
    assert "\n" not in report.error


@pytest.mark.slow
def test_verify_runs_in_the_interpreter_the_command_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the program sees no warpfix source tree either
    python = _other_venv(tmp_path, with_warp=True)
    probe = subprocess.run([str(python), "-c", "import warpfix"], capture_output=True, cwd=str(tmp_path))
    assert probe.returncode != 0  # warpfix is not importable there: the probe must be self-contained
    (tmp_path / "which.py").write_text(
        "import sys\nprint('INTERPRETER', sys.executable)\n" + (PROGRAMS / "captured.py").read_text()
    )
    report = run_verify([str(python), "which.py"], cwd=str(tmp_path), timeout=300)
    assert report.error is None, report.error
    assert f"INTERPRETER {python}" in report.program_output
    assert [p.verdict for b in report.backwards for p in b.params] == ["pass", "pass"]


@pytest.mark.slow
@pytest.mark.parametrize("seeding", [[], ["--seed-by-hand"]])
def test_captured_graph_runs_eagerly_and_seeded_backward_is_judged(seeding: list[str]) -> None:
    report = _verify("captured.py", *seeding)
    assert report.exit_code == 0, report.error
    assert any("runs eagerly under the probe" in n for n in report.notes)
    first = report.backwards[0]
    # the loss the program really computed at its first launch, not a run that never happened
    assert first.loss == pytest.approx(15.84973, rel=1e-5)
    assert first.objective.startswith("sum(seed * output)")
    assert [(p.name, p.verdict) for b in report.backwards for p in b.params] == [("self.params.k", "pass")] * 2
    assert not report.findings


@pytest.mark.slow
def test_aliased_state_is_reported_once_at_the_user_line_and_classified() -> None:
    report = _verify("captured.py", "--bug")
    assert report.exit_code == 1
    alias = [f for f in report.findings if f.rule == "WF905"]
    assert len(alias) == 1  # one per launch and array family, not one per step
    f = alias[0]
    assert (f.path, f.line, f.data["classified_as"]) == ("captured.py", 63, "WF103")
    assert f.data["count"] > 1
    doc = report.to_json()
    assert {x["rule"]: x["classified_as"] for x in doc["findings"]}["WF905"] == "WF103"
    assert any(x.rule == "WF901" and x.line == 69 for x in report.findings)


@pytest.mark.slow
def test_newton_ball_example_completes_with_verdicts() -> None:
    pytest.importorskip("newton")
    report = run_verify(
        [sys.executable, "-m", "newton.examples.diffsim.example_diffsim_ball", "--viewer", "null", "--num-frames",
         "3", "--device", "cpu"],
        cwd=str(PROGRAMS), timeout=900,
    )  # fmt: skip
    assert report.error is None, report.error
    params = [p for b in report.backwards for p in b.params]
    assert params and all(p.verdict == "pass" for p in params)
    assert report.first_iteration[0].loss == pytest.approx(9.105798, rel=1e-4)  # the example's real first loss
    assert not [f for f in report.findings if f.severity.value == "error"]
