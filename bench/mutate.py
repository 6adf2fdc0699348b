"""Mutation benchmark: plant one RULES.md bug per mutant in real Warp programs, score `check` and `apply --check`.

    python bench/mutate.py --jobs 1 --json /tmp/mutate.json          # default programs, every operator
    python bench/mutate.py --programs ball --rules WF301,WF201 --no-apply
    python bench/mutate.py --programs all --limit 2 --attempts 4
    python bench/mutate.py --programs cloth --skip 3        # held out: sites the default run never tries

For each program (bench/mutants/programs.py: newton's diffsim examples, Warp's optim and fem
optimization examples, copied from site-packages into a scratch folder) and each operator
(bench/mutants/operators.py, one bug class each):

1. the unmodified program runs twice under the gradient recorder (bench/mutants/harness): the
   loss and the gradients of every tape leaf at the first backwards; the two runs must agree;
2. a mutant is kept only when it runs, its first loss is bit for bit the original's (the bug is
   a gradient bug, not a forward change) and some recorded gradient differs (for ``retain_grad``:
   a gradient other than the retained array's own, which that flag keeps by definition). A mutant
   whose first loss changed and whose first backward's leaf gradients differ too is
   ``forward-changed``: a bug a user has, scored by ``check`` (step 3) but not by ``apply``, whose
   judge is the original's forward; one whose leaf gradients are the original's is ``same-gradient``;
3. ``warpfix check`` hits when an error of an accepted rule is reported within 2 lines of the
   planted line (or of an operator's anchor, e.g. the backward for a removed ``tape.zero()``);
4. ``warpfix apply --check -- <program>`` runs on a copy; the mutant counts as fixed when an
   edit was kept and the recorder then sees the original's losses and gradients again (an
   independent check against the unmutated program, no finite differences involved);
5. plain ``warpfix apply`` (no FD proof) runs on another copy, judged the same way: whether the
   codemod itself is right, apart from the verifier that ``--check`` depends on.

Table columns: sites (all programs), tried (mutants run), kept (gradient changed, forward not),
check (right rule, error, within 2 lines), fixed (apply --check), bad-keep (apply --check kept an
edit the recorder rejects), static (plain apply's edit reproduces the original's gradients),
fwd-chg (forward-changed mutants) and fc-check (check's hits on them).
Then the misses grouped by cause, with what check said and why apply failed.

WF601 (bench/mutants/perframe.py): ``per-frame-tape`` makes a new tape per frame and keeps the one
backward after the frame loop (the objective of the last state is unchanged, the backward sees the
last frame only); ``per-window-backward`` also moves the backward into the loop, only where the
objective is written inside the loop (drone's per-step costs, seeded by ``.grad.fill_``). Where the
objective is computed once from the last state (ball, cloth, soft_body, spring_cage, the fem and
fluid programs), a per-frame backward would need a new per-frame objective, a forward change, so
that shape is not planted there. The recorder's first backward is then the first frame's, and
drone's seed (``grad.fill_``, no ``loss=``) records no loss, so its kept mutants rest on the
gradient difference alone. Elsewhere a hand-seeded backward's forward value is the contents of the
arrays it was seeded through (the recorder's ``"seeded"``), compared like a loss.
WF801 has an operator, but none of the programs has a ``@wp.func_grad``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.mutants.operators import OPERATORS, Mutant, Operator  # noqa: E402
from bench.mutants.programs import PROGRAMS, Program  # noqa: E402

HARNESS = REPO / "bench" / "mutants" / "harness"
EXTRA_PATH: list[str] = []  # --extra-path: folders of packages some programs import (Pillow)
LINE_TOLERANCE = 2
Record = list[dict]
SCORED = ("kept", "forward-changed")  # statuses scored by check (apply scores "kept" only)


@dataclass
class Outcome:
    program: str
    operator: str
    rule: str
    site: int
    line: int
    status: str  # kept | forward-changed (gradient changed too) | crash | same-gradient | param-not-intermediate | retained-only
    detail: str = ""
    check_hit: bool = False
    check_said: list[str] = field(default_factory=list)
    apply_edits: list[dict] = field(default_factory=list)
    apply_error: str = ""
    fixed: bool = False
    fix_detail: str = ""
    verify: str = ""
    static_rules: list[str] = field(default_factory=list)  # rules `warpfix apply` (no --check) edited
    static_fixed: bool = False  # ...and the recorder then saw the original's gradients
    static_detail: str = ""
    seconds: float = 0.0


_LIVE: set[subprocess.Popen] = set()


def run_child(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """``subprocess.run`` whose child is killed on timeout and when the benchmark itself is stopped."""
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        _LIVE.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        finally:
            _LIVE.discard(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _stop(signum: int, frame: object) -> None:
    for proc in list(_LIVE):
        proc.kill()
    os._exit(128 + signum)


def env_for(record: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("WARP_CACHE_PATH", "/work/.warp-cache")
    if record is None:  # warpfix itself; `apply --check` runs the program, which needs the extra packages too
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *EXTRA_PATH])
        env.pop("MUTATE_RECORD", None)
    else:
        env["PYTHONPATH"] = os.pathsep.join([str(HARNESS), *EXTRA_PATH])
        env["MUTATE_RECORD"] = str(record)
    return env


def run_recorded(folder: Path, program: Program, timeout: float) -> tuple[Record | None, str]:
    """Run the program in ``folder`` under the recorder; (record, why not) ."""
    record = folder / "record.pkl"
    record.unlink(missing_ok=True)
    try:
        proc = run_child([sys.executable, program.file, *program.args], folder, env_for(record), timeout)
    except subprocess.TimeoutExpired:
        return None, f"timeout after {timeout:.0f} s"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        return None, f"exit {proc.returncode}: {tail[0][:200]}"
    if not record.exists():
        return None, "no record written"
    with record.open("rb") as f:
        data = pickle.load(f)
    if not data:
        return None, "no backward ran"
    return data, ""


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return bool(np.array_equal(a, b, equal_nan=True))
    scale = float(np.max(np.abs(a))) if a.size else 0.0
    return bool(np.allclose(b, a, rtol=1e-4, atol=1e-7 + 1e-5 * scale))


def _leaves_match(want: dict[str, list[np.ndarray]], got: dict[str, list[np.ndarray]]) -> str:
    for key, grads in want.items():
        pool = list(got.get(key, []))
        if len(pool) < len(grads):
            return f"leaf {key} missing"
        for grad in grads:
            match = next((i for i, g in enumerate(pool) if _close(grad, g)), None)
            if match is None:
                return f"gradient of leaf {key} differs (max |d| {_max_diff(grad, pool):.3g})"
            pool.pop(match)
    return ""


def _max_diff(grad: np.ndarray, pool: list[np.ndarray]) -> float:
    diffs = [float(np.max(np.abs(grad - g))) for g in pool if g.shape == grad.shape and g.size]
    return min(diffs) if diffs else float("inf")


def _values_equal(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))


def _values_among(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """Each of ``a`` is bit for bit one of ``b`` (each used once), and ``a`` is empty only when ``b`` is."""
    left = list(b)
    for x in a:
        match = next((i for i, y in enumerate(left) if np.array_equal(x, y, equal_nan=True)), None)
        if match is None:
            return False
        del left[match]
    return bool(a) == bool(b)


def first_loss_equal(want: Record, got: Record, seeded: bool = True) -> bool:
    """The first backward's loss is bit for bit ``want``'s and, with ``seeded``, so are the values of the
    arrays a hand-seeded backward (no ``loss=``) starts from: such a program's forward value. Those of
    ``got`` need only be among ``want``'s: a mutant whose tape records less (a tape per frame) starts its
    backward from fewer of the same arrays."""
    if not _values_equal(want[0]["loss"], got[0]["loss"]):
        return False
    return not seeded or _values_among(got[0].get("seeded", []), want[0].get("seeded", []))


def first_gradient_diff(want: Record, got: Record) -> str:
    """'' when the first backward of ``got`` has every leaf gradient of ``want``'s first, else the difference."""
    why = _leaves_match(want[0]["leaves"], got[0]["leaves"])
    return f"forward changed; backward 1: {why}" if why else ""


def compare(want: Record, got: Record) -> str:
    """'' when ``got`` reproduces every recorded backward of ``want``, else the first difference."""
    if len(want) != len(got):
        return f"{len(got)} backwards recorded, the original has {len(want)}"
    for n, (w, g) in enumerate(zip(want, got, strict=True), 1):
        for part in ("loss", "seeded"):
            a, b = w.get(part, []), g.get(part, [])
            if len(a) != len(b) or not all(_close(x, y) for x, y in zip(a, b, strict=True)):
                return f"loss of backward {n} differs" if part == "loss" else f"seeded values of backward {n} differ"
        why = _leaves_match(w["leaves"], g["leaves"])
        if why:
            return f"backward {n}: {why}"
    return ""


def retained_only(original: Record, got: Record) -> bool:
    """Only leaves that carry ``retain_grad`` in ``got`` have other gradients than ``original``: the
    retained array's own ``.grad`` keeps what the adjoint of its one write would have consumed, and every
    gradient upstream is the original's. Not a WF501 bug (RULES.md: an array written more than once)."""
    ignore = [set(b.get("retained", ())) for b in got]
    if not any(ignore):
        return False

    def trim(record: Record) -> Record:
        return [{**b, "leaves": {k: v for k, v in b["leaves"].items() if k not in ignore[n]}} if n < len(ignore) else b
                for n, b in enumerate(record)]

    return not compare(trim(original), trim(got))


def run_warpfix(args: Sequence[str], cwd: Path, timeout: float) -> tuple[dict | None, str]:
    try:
        proc = run_child([sys.executable, "-m", "warpfix", *args], cwd, env_for(None), timeout)
    except subprocess.TimeoutExpired:
        return None, f"timeout after {timeout:.0f} s"
    out = proc.stdout
    start = out.find("{")
    if start < 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return None, f"exit {proc.returncode}, no JSON: {tail[0][:200]}"
    try:
        return json.loads(out[start:]), ""
    except json.JSONDecodeError as exc:
        return None, f"exit {proc.returncode}, bad JSON: {exc}"


def score_check(op: Operator, mutant: Mutant, folder: Path, program: Program, timeout: float) -> tuple[bool, list[str]]:
    data, why = run_warpfix(["check", "--format", "json", "--no-cache", program.file], folder, timeout)
    if data is None:
        return False, [f"check failed: {why}"]
    anchors = [mutant.line, *mutant.anchors]
    said, hit = [], False
    for f in data.get("findings", []):
        said.append(f"{f['rule']}:{f['line']}:{f['severity']}")
        # within LINE_TOLERANCE of the finding's span (a multi-line call whose keyword line the mutant changed)
        first, last = f["line"] - LINE_TOLERANCE, max(f["line"], f.get("end_line") or f["line"]) + LINE_TOLERANCE
        if f["rule"] in op.accepts and f["severity"] == "error" and any(first <= a <= last for a in anchors):
            hit = True
    return hit, said


def score_apply(outcome: Outcome, mutant: Mutant, folder: Path, program: Program, original: Record,
                timeout: float) -> None:
    fix = folder / "fix"
    fix.mkdir(exist_ok=True)
    target = fix / program.file
    target.write_text(mutant.code)
    cmd = ["apply", "--check", "--format", "json", "--no-cache", "--timeout", str(timeout), program.file,
           "--", sys.executable, program.file, *program.args]
    data, why = run_warpfix(cmd, fix, timeout * 4)
    if data is None:
        outcome.apply_error = why
        return
    outcome.apply_edits = [
        {k: e.get(k) for k in ("rule", "line", "kept", "reason")} for e in data.get("edits", [])
    ]
    if target.read_text() == mutant.code:
        outcome.fix_detail = "file unchanged"
        return
    outcome.fixed, outcome.fix_detail = judge_fixed(fix, program, original, timeout)


def judge_fixed(fix: Path, program: Program, original: Record, timeout: float) -> tuple[bool, str]:
    """Run the edited program under the recorder: fixed when the original's losses and gradients come back."""
    fixed, why = run_recorded(fix, program, timeout)
    if fixed is None:
        return False, f"fixed program: {why}"
    if not first_loss_equal(original, fixed):
        return False, "first loss changed by the fix"
    diff = compare(original, fixed)
    return not diff, diff or "matches the original"


def score_static(outcome: Outcome, mutant: Mutant, folder: Path, program: Program, original: Record,
                 timeout: float) -> None:
    """Plain ``warpfix apply`` (no FD proof), judged by the recorder: is the codemod itself right?"""
    fix = folder / "static"
    fix.mkdir(exist_ok=True)
    target = fix / program.file
    target.write_text(mutant.code)
    data, why = run_warpfix(["apply", "--format", "json", "--no-cache", program.file], fix, timeout)
    if data is None:
        outcome.static_detail = f"apply: {why}"
        return
    outcome.static_rules = sorted({e.get("rule", "?") for e in data.get("edits", [])})
    if target.read_text() == mutant.code:
        outcome.static_detail = "no edit"
        return
    outcome.static_fixed, outcome.static_detail = judge_fixed(fix, program, original, timeout)


def score_verify(outcome: Outcome, folder: Path, program: Program, timeout: float) -> None:
    cmd = ["verify", "--format", "json", "--", sys.executable, program.file, *program.args]
    data, why = run_warpfix(cmd, folder, timeout * 2)
    if data is None:
        outcome.verify = f"error: {why}"
        return
    if data.get("error"):
        outcome.verify = f"could not verify: {data['error'][:120]}"
        return
    verdicts = sorted({p["verdict"] for b in data.get("backwards", []) for p in b.get("params", [])})
    rules = sorted({f["rule"] for f in data.get("findings", []) if f.get("severity") == "error"})
    outcome.verify = f"exit {data.get('exit_code')}: {'/'.join(verdicts) or 'no verdict'}" + (
        f" {','.join(rules)}" if rules else ""
    )


class Bench:
    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.scratch = Path(opts.scratch)
        self.outcomes: list[Outcome] = []
        self.sites: dict[tuple[str, str], int] = {}
        self.skipped: dict[str, str] = {}
        self.lock = threading.Lock()

    def baseline(self, program: Program) -> Record | None:
        records = []
        for n in (1, 2):
            folder = self.scratch / program.name / f"original-{n}"
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(program.source, folder / program.file)
            record, why = run_recorded(folder, program, self.opts.timeout)
            if record is None:
                self.skipped[program.name] = f"original does not run: {why}"
                return None
            records.append(record)
        diff = compare(records[0], records[1])
        if diff or not first_loss_equal(records[0], records[1]):
            self.skipped[program.name] = f"original not deterministic: {diff or 'first loss differs'}"
            return None
        return records[0]

    def mutants_of(self, program: Program, op: Operator, original: Record) -> None:
        source = program.source.read_text()
        count = op.count(source)
        with self.lock:
            self.sites[(program.name, op.name)] = count
        kept = 0
        for site in range(self.opts.skip, min(count, self.opts.skip + self.opts.attempts)):
            if kept >= self.opts.limit:
                break
            mutant = op.mutate(source, site)
            if mutant is None:
                continue
            start = time.monotonic()
            outcome = self.one(program, op, mutant, original)
            outcome.seconds = round(time.monotonic() - start, 1)
            kept += outcome.status == "kept"
            with self.lock:
                self.outcomes.append(outcome)
                self.save()
            print(f"  {program.name} {op.name}#{site} line {mutant.line}: {outcome.status}"
                  + (f" check={'hit' if outcome.check_hit else 'miss'}" if outcome.status in SCORED else "")
                  + (f" fixed={outcome.fixed}" if outcome.status == "kept" and not self.opts.no_apply else "")
                  + f" ({outcome.seconds:.0f} s)", flush=True)

    def one(self, program: Program, op: Operator, mutant: Mutant, original: Record) -> Outcome:
        folder = self.scratch / program.name / f"{op.name}-{mutant.site}"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / program.file).write_text(mutant.code)
        outcome = Outcome(program.name, op.name, op.rule, mutant.site, mutant.line, "kept")
        record, why = run_recorded(folder, program, self.opts.timeout)
        if record is None:
            outcome.status, outcome.detail = "crash", why
            return outcome
        # a mutant that moves the backward into the frame loop records its first backward earlier, when
        # the seeded arrays are only partly written: their values there say nothing of the forward
        forward_changed = not first_loss_equal(original, record, seeded=not op.moves_backward)
        # a changed forward changes the recorded losses: its gradient is judged on the leaves alone
        diff = first_gradient_diff(original, record) if forward_changed else compare(original, record)
        if not diff:
            outcome.status = "same-gradient"
            outcome.detail = "the forward changed, the first backward's gradients did not" if forward_changed else ""
            return outcome
        if op.rule == "WF501" and retained_only(original, record):
            outcome.status, outcome.detail = "retained-only", "only the retained array's own gradient changed"
            return outcome
        if op.rule == "WF201" and not set(original[0]["leaves"]) <= set(record[0]["leaves"]):
            outcome.status, outcome.detail = "param-not-intermediate", "the flag was dropped on a tape leaf"
            return outcome
        outcome.detail = diff
        outcome.check_hit, outcome.check_said = score_check(op, mutant, folder, program, self.opts.timeout)
        if forward_changed:  # a bug a user has, scored for check; apply's judge needs the original forward
            outcome.status = "forward-changed"
            return outcome
        if self.opts.verify:
            score_verify(outcome, folder, program, self.opts.timeout)
        if not self.opts.no_apply:
            score_apply(outcome, mutant, folder, program, original, self.opts.timeout)
            score_static(outcome, mutant, folder, program, original, self.opts.timeout)
        return outcome

    def rescore_static(self, outcomes: list[Outcome], only: set[str] | None) -> None:
        """Add the static-apply score to the kept mutants of an earlier run (same scratch folder)."""
        programs = {p.name: p for p in PROGRAMS}
        ops = {op.name: op for op in OPERATORS}
        for o in outcomes:
            self.outcomes.append(o)
            if o.status != "kept" or o.static_detail or (only is not None and o.program not in only):
                continue
            program = programs[o.program]
            with (self.scratch / o.program / "original-1" / "record.pkl").open("rb") as f:
                original = pickle.load(f)
            mutant = ops[o.operator].mutate(program.source.read_text(), o.site)
            assert mutant is not None
            score_static(o, mutant, self.scratch / o.program / f"{o.operator}-{o.site}", program, original,
                         self.opts.timeout)
            print(f"  {o.program} {o.operator}#{o.site}: static {o.static_rules} {o.static_detail}", flush=True)
            self.save()

    def save(self) -> None:
        if self.opts.json:
            data = {
                "outcomes": [asdict(o) for o in self.outcomes],
                "sites": {f"{p}/{o}": n for (p, o), n in self.sites.items()},
                "skipped": self.skipped,
            }
            Path(self.opts.json).write_text(json.dumps(data, indent=1))


def table(bench: Bench, ops: list[Operator], apply: bool) -> str:
    head = f"{'rule':6} {'operator':22} {'sites':>5} {'tried':>5} {'kept':>4} {'check':>5}"
    head += f" {'fixed':>5} {'bad-keep':>8} {'static':>6}" if apply else ""
    head += f" {'fwd-chg':>7} {'fc-check':>8}"
    lines = [head, "-" * len(head)]
    totals = np.zeros(9, dtype=int)
    for op in ops:
        mine = [o for o in bench.outcomes if o.operator == op.name]
        kept = [o for o in mine if o.status == "kept"]
        changed = [o for o in mine if o.status == "forward-changed"]
        row = np.array([
            sum(n for (_, name), n in bench.sites.items() if name == op.name), len(mine), len(kept),
            sum(o.check_hit for o in kept), sum(o.fixed for o in kept),
            sum(1 for o in kept if not o.fixed and any(e.get("kept") for e in o.apply_edits)),
            sum(o.static_fixed for o in kept), len(changed), sum(o.check_hit for o in changed),
        ])
        totals += row
        lines.append(_row(f"{op.rule:6} {op.name:22}", row, apply))
    lines.append("-" * len(head))
    lines.append(_row(f"{'total':29}", totals, apply))
    return "\n".join(lines)


def _row(label: str, row: np.ndarray, apply: bool) -> str:
    line = f"{label} {row[0]:5} {row[1]:5} {row[2]:4} {row[3]:5}"
    line += f" {row[4]:5} {row[5]:8} {row[6]:6}" if apply else ""
    return line + f" {row[7]:7} {row[8]:8}"


def by_program(bench: Bench, apply: bool) -> str:
    """One line per program and operator that had scored mutants: check hits and fixes of each set."""
    cells: dict[tuple[str, str], list[Outcome]] = {}
    for o in bench.outcomes:
        if o.status in SCORED:
            cells.setdefault((o.program, o.operator), []).append(o)
    out = []
    for (program, operator), mine in sorted(cells.items()):
        kept = [o for o in mine if o.status == "kept"]
        changed = [o for o in mine if o.status == "forward-changed"]
        text = f"  {program:16} {operator:22} kept {len(kept)}: check {sum(o.check_hit for o in kept)}"
        text += f", fixed {sum(o.fixed for o in kept)}" if apply else ""
        if changed:
            text += f"; forward-changed {len(changed)}: check {sum(o.check_hit for o in changed)}"
        out.append(text)
    return "\n".join(out)


def check_cause(o: Outcome, op: Operator) -> str:
    """Why check missed a kept mutant, in a few words."""
    if o.check_hit:
        return "check hit"
    if not o.check_said:
        return "check: nothing reported"
    if o.check_said[0].startswith("check failed"):
        return "check: failed to run"
    rules = [s.split(":") for s in o.check_said]
    right = [r for r in rules if r[0] in op.accepts]
    if not right:
        return "check: other rules only"
    if all(r[2] != "error" for r in right):
        return "check: right rule, not an error"
    return "check: right rule, another line"


def apply_cause(o: Outcome) -> str:
    """Why apply --check did not fix a kept mutant."""
    if o.fixed:
        return "fixed"
    if o.apply_error:
        text = o.apply_error
        return "apply: " + (text.split(": ", 1)[1] if ": " in text else text)[:90]
    if not o.apply_edits:
        return "apply: no edit offered"
    if not any(e.get("kept") for e in o.apply_edits):
        return "apply: every edit reverted"
    return "apply: edit kept, gradient still differs from the original"


def misses(bench: Bench, apply: bool) -> str:
    """The kept mutants that check or apply --check missed, grouped by cause."""
    ops = {op.name: op for op in OPERATORS}
    groups: dict[str, list[str]] = {}
    for o in bench.outcomes:
        scored_apply = apply and o.status == "kept"
        if o.status not in SCORED or (o.check_hit and (o.fixed or not scored_apply)):
            continue
        cause = check_cause(o, ops[o.operator]) + (f" / {apply_cause(o)}" if scored_apply else "")
        cause += " (forward changed)" if o.status == "forward-changed" else ""
        said = ", ".join(o.check_said) or "nothing"
        line = f"  {o.program} {o.operator}#{o.site} line {o.line} ({o.rule}) | check: {said}"
        if scored_apply and not o.fixed:
            edits = "; ".join(f"{e['rule']}:{e['line']} {'kept' if e['kept'] else 'reverted'} ({e['reason']})"
                              for e in o.apply_edits) or "no edit"
            line += f" | apply: {o.apply_error or edits} | after: {o.fix_detail}"
            line += f" | plain apply: {','.join(o.static_rules) or '-'}: {o.static_detail}"
        groups.setdefault(cause, []).append(line)
    out = []
    for cause, lines in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        out.append(f"{cause} ({len(lines)}):")
        out.extend(lines)
    return "\n".join(out)


def discarded(bench: Bench) -> str:
    out = []
    for o in bench.outcomes:
        if o.status not in SCORED:
            out.append(f"{o.program} {o.operator}#{o.site} line {o.line}: {o.status} {o.detail}".rstrip())
    return "\n".join(out)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--programs", help="comma-separated program names, or 'all' (default: the fast ones)")
    p.add_argument("--rules", help="comma-separated rule IDs or operator names (default: all)")
    p.add_argument("--limit", type=int, default=1, help="kept mutants per program and operator (default 1)")
    p.add_argument("--attempts", type=int, default=3, help="sites tried per program and operator (default 3)")
    p.add_argument("--skip", type=int, default=0, metavar="N",
                   help="start at each operator's site N, past the sites earlier runs tried (held-out mutants)")
    p.add_argument("--jobs", type=int, default=1, help="mutants evaluated in parallel (default 1)")
    p.add_argument("--json", help="write every outcome to this file (updated after each mutant)")
    p.add_argument("--no-apply", action="store_true", help="score check only")
    p.add_argument("--verify", action="store_true", help="also run `warpfix verify` on each kept mutant")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per program run (default 300)")
    p.add_argument("--extra-path", action="append", default=[], metavar="DIR",
                   help="a folder put on the programs' PYTHONPATH (packages some examples import, e.g. Pillow)")
    p.add_argument("--scratch", default="/tmp/warpfix-mutate", help="scratch folder for copies and mutants")
    p.add_argument("--from-json", nargs="+", metavar="FILE", help="print the tables of earlier --json runs, run nothing")
    p.add_argument("--rescore-static", metavar="FILE",
                   help="add the plain-apply score to the kept mutants of an earlier --json run (same --scratch; "
                   "--programs limits it)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse(argv)
    EXTRA_PATH[:] = [os.path.abspath(d) for d in opts.extra_path]
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if opts.programs in (None, ""):
        programs = [p for p in PROGRAMS if p.default]
    elif opts.programs == "all":
        programs = list(PROGRAMS)
    else:
        wanted = opts.programs.split(",")
        programs = [p for p in PROGRAMS if p.name in wanted]
        unknown = set(wanted) - {p.name for p in programs}
        if unknown:
            print(f"unknown programs: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
    ops = OPERATORS
    if opts.rules:
        wanted = set(opts.rules.split(","))
        ops = [op for op in OPERATORS if op.rule in wanted or op.name in wanted]
    bench = Bench(opts)
    if opts.rescore_static:
        data = json.loads(Path(opts.rescore_static).read_text())
        bench.sites = {tuple(k.split("/", 1)): n for k, n in data["sites"].items()}  # type: ignore[misc]
        bench.skipped = data["skipped"]
        only = set(opts.programs.split(",")) if opts.programs else None
        bench.rescore_static([Outcome(**o) for o in data["outcomes"]], only)
        bench.save()
        return 0
    if opts.from_json:
        for path in opts.from_json:
            data = json.loads(Path(path).read_text())
            bench.outcomes.extend(Outcome(**o) for o in data["outcomes"])
            for key, n in data["sites"].items():
                bench.sites[tuple(key.split("/", 1))] = n  # type: ignore[index]
            bench.skipped.update(data["skipped"])
        report(bench, ops, not opts.no_apply, sorted({o.program for o in bench.outcomes}), None)
        return 0
    start = time.monotonic()
    tasks = []
    for program in programs:
        print(f"{program.name}: baseline", flush=True)
        original = bench.baseline(program)
        if original is None:
            print(f"  skipped: {bench.skipped[program.name]}", flush=True)
            continue
        print(f"  {len(original)} backwards recorded, {len(original[0]['leaves'])} leaves", flush=True)
        tasks.extend((program, op, original) for op in ops)
    with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        for future in [pool.submit(bench.mutants_of, *t) for t in tasks]:
            future.result()
    bench.save()
    report(bench, ops, not opts.no_apply, [p.name for p in programs], time.monotonic() - start)
    return 0


def report(bench: Bench, ops: list[Operator], apply: bool, programs: list[str], seconds: float | None) -> None:
    print()
    print(table(bench, ops, apply))
    wall = f", {seconds:.0f} s wall" if seconds is not None else ""
    print("\nby program:\n" + by_program(bench, apply))
    print(f"\n{len(programs)} programs ({', '.join(programs)}){wall}")
    for name, why in bench.skipped.items():
        print(f"skipped {name}: {why}")
    text = misses(bench, apply)
    if text:
        print("\nmisses:\n" + text)
    text = discarded(bench)
    if text:
        print("\ndiscarded mutants:\n" + text)


if __name__ == "__main__":
    sys.exit(main())
