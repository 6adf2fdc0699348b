"""The verify probe's FD comparison: replay the recorded window with a leaf perturbed, and judge
autodiff against central differences of the backward's objective (see :mod:`warpfix.verify.probe`).

A mixin of the probe's ``Tracer``: it works on the tracer's recorded window (``ops``, ``arrays``) and
its budget, and is part of the probe package (relative imports, warp and numpy only). The replays
themselves: :mod:`warpfix.verify.fd_replay`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import judge
from .discriminate import along_the_change
from .fd_replay import FdReplay, _BudgetSpent
from .ladder import STEP_LADDER, run_ladder
from .records import ArrayInfo, BackwardRecord, Objective, PendingCompare, ReplayPlan
from .replay_holds import held_constant, hold_completed_segments, put_back_downstream
from .sketch import sketch
from .spans import with_aliases

#: A step is at least this many ulp of the perturbed value.
MIN_STEP_ULPS = 32.0
#: Element samples per parameter (both ends plus random ones) and random +-1 directions.
ELEMENT_SAMPLES = 4
DIRECTION_SAMPLES = 2
#: No new backward is compared once FD has taken this many seconds (the floor ``verify`` uses unless told
#: otherwise: the probe's ``fd_floor``) ...
FD_BUDGET_S = 15.0
#: ... or twice the time the program itself has run so far, when that is more (big examples): ``verify`` then
#: costs a few times the program's own run, whatever one replay of its iteration costs.
FD_PROGRAM_FACTOR = 2.0
#: Replays one FD sample takes when its ladder passes early (two steps, each a central difference).
REPLAYS_PER_SAMPLE = 4
#: Leaves compared per backward when the program updates none of them from gradients.
UNTRAINED_LEAVES = 4
#: Replays that do not reproduce the loss to this relative tolerance make FD unreliable.
REPLAY_RTOL = 1e-4


class FiniteDifferences(FdReplay):
    """FD comparisons of the backwards the tracer recorded (mixed into ``Tracer``)."""

    def plan_compare(
        self, entry: dict[str, Any], objective: Objective, leaves: list[ArrayInfo], ad: dict[int, np.ndarray],
        path: str, line: int, record: BackwardRecord,
    ) -> PendingCompare:
        """Everything a later FD comparison of this backward needs, fixed now (the window moves on)."""
        infos = sorted(self.arrays.values(), key=lambda i: i.order)
        n_ops = len(self.ops)
        written = with_aliases(infos, {id(w) for op in self.ops for w in op.writes})
        start = self.tape_start or 0
        restore = [i for i in infos if id(i) in written or self.is_param_candidate(i)]
        plan = ReplayPlan(n_ops, restore, {}, start, {i.order: self.tape_state[i.order] for i in restore
                                                      if i.order in self.tape_state})  # fmt: skip
        for info in infos:
            if info.reset_at is not None and start <= info.reset_at < n_ops:
                plan.resets.setdefault(info.reset_at, []).append(info)
        for info in leaves:
            # perturbed where the iteration reads it: uses in set-up before the tape are constants (as to autodiff)
            at = max(self.leaf_read.get(info.order, info.first_read), start)
            plan.leaves_at.setdefault(at, []).append(info)
        notes = {}
        for info in leaves:
            host = self.host_reads.get(id(info.arr))
            if host is not None and host[0] is info.arr and host[2] <= n_ops:
                notes[id(info)] = (
                    f"the program reads `{info.name}` on the host at {host[1]}: values it computes from it there "
                    "are constants to both autodiff and this FD"
                )
        return PendingCompare(entry, objective, leaves, ad, path, line, plan, infos, self.verified, record, notes)

    def fd_budget(self) -> float:
        """Seconds FD may take in all: the floor (``fd_floor``), or a multiple of the program's own run time so far
        (the probe's tracing, integrity checks and FD are not the program's)."""
        probe = self.fd_seconds + self.seconds.get("trace", 0.0) + self.seconds.get("integrity", 0.0)
        return max(self.fd_floor, FD_PROGRAM_FACTOR * (time.perf_counter() - self.started - probe))

    def flush_pending(self) -> None:
        """Run the FD comparisons of the backwards seen so far: the parameters the program updated from
        gradients (its trained parameters), or, when it updated none yet, the first few leaves."""
        pending, self.pending = self.pending, []
        for k, job in enumerate(pending):
            hold_completed_segments(self.ops, job, pending[k + 1:])
            started = time.perf_counter()
            trained = [i for i in job.leaves if i.trained]
            chosen = trained or job.leaves[:UNTRAINED_LEAVES]
            skipped = len(job.leaves) - len(chosen)
            if skipped:
                why = "the program updates only the compared ones from gradients" if trained else "cap"
                extra = f"{skipped} other leaf array(s) on the tape not compared ({why})"
                job.entry["note"] = f"{job.entry['note']}; {extra}" if job.entry.get("note") else extra
            # fixed for the job: FD's own time during it is not the program's
            self.fd_job_budget = self.fd_budget()
            if self.fd_seconds > self.fd_job_budget:
                spent = f"not compared: the FD time budget ({self.fd_job_budget:.0f} s) is spent"
                job.entry["note"] = f"{job.entry['note']}; {spent}" if job.entry.get("note") else spent
                continue
            self.fd_deadline = started + max(self.fd_job_budget - self.fd_seconds, 0.0)
            with self.paused():
                try:
                    job.entry["params"] = self.compare(job, chosen)
                except Exception as exc:  # noqa: BLE001 - one backward that cannot be replayed is not fatal
                    job.entry["note"] = f"FD replay failed: {type(exc).__name__}: {exc}"
            job.record.params.update({i.order: p["verdict"] for i, p in zip(chosen, job.entry["params"], strict=False)})
            verdicts = {p["verdict"] for p in job.entry["params"]}
            if verdicts and judge.FAIL not in verdicts:
                if verdicts == {judge.PASS}:  # a real overwrite, but the gradient it feeds agrees with FD
                    why = (f"FD agrees with autodiff at the backward at {job.path}:{job.line}, so the "
                           "overwritten values do not change this gradient measurably here")
                else:  # programs with their own adjoints (tape.record_func) overwrite on purpose
                    why = (f"FD cannot judge the backward at {job.path}:{job.line} (unreliable), so nothing "
                           "confirms that the overwritten values reach its gradient")
                for f in job.integrity:
                    if f.get("severity") is None:
                        f["severity"] = "warning"
                        f["message"] += f"; {why}"
            took = time.perf_counter() - started
            self.fd_seconds += took
            self.seconds["fd"] = self.fd_seconds
            self.seconds[f"fd_window{self.window}"] = self.seconds.get(f"fd_window{self.window}", 0.0) + took
        self.flush()

    def compare(self, job: PendingCompare, leaves: list[ArrayInfo]) -> list[dict[str, Any]]:
        out = self.replay_and_judge(job, leaves)
        first_record = job.records[0] if job.records and job.records[0] is not job.record else None
        for info, res in zip(leaves, out, strict=True):
            res["ad_sketch"] = sketch(job.ad[id(info)])  # what apply --check compares across an edit
            note = job.notes.get(id(info))
            if note:
                res["reason"] = f"{res['reason']}; {note}" if res["reason"] else note
            earlier = first_record.params.get(info.order) if first_record else None
            if res["verdict"] == judge.FAIL and earlier == judge.PASS and res["signature"] != "NaN/inf":
                res["reason"] = (
                    f"{res['signature']} mismatch at a later backward of this iteration while the first agrees: "
                    "each tape differentiates its own window only"
                )
                res["signature"] = "cross-window"
            self.emit_param_findings(info, res, job.path, job.line)
        return out

    def replay_and_judge(self, job: PendingCompare, leaves: list[ArrayInfo]) -> list[dict[str, Any]]:
        """The FD verdict on each leaf, from replays of the window (restored to its state afterwards)."""
        infos = job.infos
        checkpoint = {id(i): self.wp.clone(i.arr, requires_grad=False) for i in infos}
        objective, value = job.objective, job.entry["loss"]
        loss_ulp = objective.ulp(self.wp) if math.isfinite(value) else 0.0
        out: list[dict[str, Any]] = []
        try:
            values: dict[int, np.ndarray] = {}
            started = time.perf_counter()
            replays = (self.replay(job.plan, objective, {}, capture=values), self.replay(job.plan, objective, {}))
            per_replay = (time.perf_counter() - started) / 2.0
            worst = max(replays, key=lambda v: abs(v - value) if math.isfinite(v) else math.inf)
            noise = abs(worst - value) if math.isfinite(worst) else math.inf
            replay_ok = noise <= REPLAY_RTOL * abs(value) + loss_ulp
            if not replay_ok:
                self.note_divergence(job.plan, objective)
            for k, info in enumerate(leaves):
                # as many samples as the budget left allows, shared by the leaves still to judge
                left = (self.fd_deadline - time.perf_counter()) / max(per_replay, 1e-9) / (len(leaves) - k)
                most = max(1, int(left // REPLAYS_PER_SAMPLE))
                out.append(
                    self.compare_param(info, objective, value, loss_ulp, noise, worst, replay_ok, values,
                                       job.ad[id(info)], job.plan, most)
                )  # fmt: skip
                if replay_ok:  # apply --check: FD along what an edit changed in this gradient
                    along_the_change(self, job, info, values, out[-1])
        except _BudgetSpent:
            reason = (
                f"the FD time budget ({self.fd_job_budget:.0f} s) ran out while replaying the iteration "
                f"({job.plan.n_ops} operations)"
            )
            out += [_unjudged(i, reason) for i in leaves[len(out):]]
        finally:
            self.restore(infos, checkpoint)
        return out

    def compare_param(
        self,
        info: ArrayInfo,
        objective: Objective,
        loss_value: float,
        loss_ulp: float,
        noise: float,
        replayed: float,
        replay_ok: bool,
        values: dict[int, np.ndarray],
        grad: np.ndarray,
        plan: ReplayPlan,
        most: int = ELEMENT_SAMPLES + DIRECTION_SAMPLES,
    ) -> dict[str, Any]:
        """The FD verdict on one leaf, from ``most`` perturbations at most (elements, then random
        directions; when the budget allows fewer than all, one direction covers every element first)."""
        base = {"name": info.name, "max_rel_err": None, "ad_fd_ratio": None, "signature": ""}
        if not replay_ok:
            got, want = distinct_digits(replayed, loss_value)
            reason = (
                f"{judge.NOISE}: replaying the iteration gives loss {got} instead of {want}"
                f"{relative_difference(replayed, loss_value)} (nondeterministic forward or state the "
                "probe cannot restore)"
            )
            return {**base, "verdict": judge.UNRELIABLE, "reason": reason}
        x = values[info.order]  # the parameter as its first reader sees it
        dtype, ulp, scale = self.perturbation_units(info, x)
        n = x.size
        picks = [0, n - 1] + [int(i) for i in self.rng.choice(n, size=min(n, ELEMENT_SAMPLES), replace=False)]
        elements = list(dict.fromkeys(picks))[:ELEMENT_SAMPLES]
        vectors: list[tuple[str, int | None, np.ndarray]] = []
        for i in elements:
            v = np.zeros(n)
            v[i] = scale[i]
            vectors.append(("element", i, v))
        if n > len(elements):  # directions add nothing when every element is sampled
            for _ in range(DIRECTION_SAMPLES):
                vectors.append(("direction", None, self.rng.choice([-1.0, 1.0], size=n) * scale))
        planned = len(vectors)
        if most < len(vectors):  # an iteration too costly to replay for every sample in the budget
            elements_first = sorted((v for v in vectors if v[0] == "element"), key=lambda v: -abs(float(grad[v[1]])))
            vectors = [v for v in vectors if v[0] == "direction"][:1] + elements_first
            vectors = vectors[:most]
            base["reason"] = (f"{len(vectors)} perturbation(s) instead of {ELEMENT_SAMPLES + DIRECTION_SAMPLES}: "
                              "the FD time budget allows no more replays of this iteration")  # fmt: skip
        ladders: list[tuple[str, int | None, float, list[judge.StepResult]]] = []
        for kind, idx, v in vectors:
            steps: list[judge.StepResult] = []
            ad_v = float(np.dot(grad, v))
            try:
                if time.perf_counter() > self.fd_deadline:
                    raise _BudgetSpent
                measure, deltas = self.rung_measure(info, objective, plan, x, v, idx, ulp, dtype)
                agreed = run_ladder(measure, ad_v, loss_ulp, noise, self.fd_start_rung.get(id(info.arr), 0), steps,
                                    lambda k, _d=deltas: self.note_non_finite(plan, objective, {info.order: _d[k]}))  # fmt: skip
                if agreed is not None:
                    self.fd_start_rung[id(info.arr)] = agreed
            except _BudgetSpent:
                # judge what was measured: the complete ladders, and this one if it already says something
                if len(steps) >= 2 or (steps and not math.isfinite(steps[-1].fd)):
                    ladders.append((kind, idx, ad_v, steps))
                spent = f"the FD time budget ({self.fd_job_budget:.0f} s) ran out"
                if not ladders:
                    return {**base, "verdict": judge.UNRELIABLE, "reason": f"{spent} before this parameter was judged"}
                base["reason"] = f"{spent} after {len(ladders)} of {len(vectors)} perturbation(s)"
                break
            ladders.append((kind, idx, ad_v, steps))
        fd_mid = [abs(s[1].fd) for _, _, _, s in ladders if len(s) > 1 and math.isfinite(s[1].fd)]
        floor = 1e-3 * float(np.median(fd_mid)) if fd_mid else 0.0
        samples = []
        for kind, idx, ad_v, steps in ladders:
            samples.append(judge.judge_sample(kind, ad_v, steps, loss_ulp, noise=noise, fd_floor=floor, index=idx,
                                              base=replayed))
        chaos = any(abs(s.ad) > 1e4 * (abs(loss_value) + 1.0) for s in samples if math.isfinite(s.ad))
        verdict = judge.classify(samples, chaos_hint=chaos, planned=planned)
        if verdict.verdict == judge.FAIL and verdict.signature != "NaN/inf":
            held = held_constant(self.ops, plan, info)
            cut = put_back_downstream(self.ops, plan, info) if held is None else None
            if held is not None:
                array, op = held
                verdict.verdict, verdict.signature = judge.UNRELIABLE, ""
                verdict.reason = (
                    f"FD disagrees with autodiff ({verdict.reason or 'mismatch'}), but the taped operations read "
                    f"`{array.name}`, which has no gradient and which the {op.label} at {op.path}:{op.line}, "
                    f"recorded on no tape, computed from `{info.name}`: the program holds it constant to autodiff "
                    "(an adjoint by hand, like a compliance sensitivity), while FD of the replay does not"
                )
            elif cut is not None:
                verdict.verdict, verdict.signature = judge.UNRELIABLE, ""
                verdict.reason = (
                    f"FD disagrees with autodiff ({verdict.reason or 'mismatch'}), but the replay puts back "
                    f"`{cut.name}` (memory the program changed outside the trace) before operation {cut.reset_at}, "
                    f"though it holds values computed from `{info.name}`: the replay holds them constant, so its FD "
                    "is no evidence against the gradient"
                )
        return {
            **base,
            "verdict": verdict.verdict,
            "signature": verdict.signature,
            "max_rel_err": verdict.max_rel_err,
            "ad_fd_ratio": verdict.ad_fd_ratio,
            "reason": "; ".join(r for r in (verdict.reason, base.get("reason", "")) if r),
            "planned": planned,
            "samples": [_sample_json(s, steps) for s, (_, _, _, steps) in zip(samples, ladders, strict=True)],
        }

    def perturbation_units(self, info: ArrayInfo, x: np.ndarray) -> tuple[type, np.ndarray, np.ndarray]:
        """For perturbing leaf ``info`` at values ``x``: its numpy dtype, each element's ulp, and each element's
        scale (its magnitude, at least the rms, at most 1; 1 where all are 0) that a perturbation is measured in."""
        dtype = np.float64 if self.wp._src.types.type_scalar_type(info.arr.dtype) == self.wp.float64 else np.float32
        ulp = np.spacing(np.abs(x.astype(dtype))).astype(np.float64)
        rms = float(np.sqrt(np.mean(x * x))) if x.size else 0.0
        scale = np.minimum(1.0, np.maximum(np.abs(x), rms))
        scale[scale == 0.0] = 1.0
        return dtype, ulp, scale

    def rung_measure(
        self, info: ArrayInfo, objective: Objective, plan: ReplayPlan, x: np.ndarray, v: np.ndarray,
        idx: int | None, ulp: np.ndarray, dtype: type, ladder: tuple[float, ...] = STEP_LADDER,
    ) -> tuple[Callable[[int], judge.StepResult], dict[int, np.ndarray]]:
        """``measure(k)``: the losses of the replays perturbed by +-t v at rung ``k`` of the step ladder; and the
        perturbation of each measured rung whose loss is not finite (by rung)."""
        xs = x.astype(dtype)
        nz = v != 0.0
        t_min = float(np.max(MIN_STEP_ULPS * ulp[nz] / np.abs(v[nz]))) if np.any(nz) else 0.0
        deltas: dict[int, np.ndarray] = {}

        def measure(k: int) -> judge.StepResult:
            c = ladder[k]
            # the whole ladder moves up when its smallest rung would be under MIN_STEP_ULPS
            t = max(c, t_min * c / ladder[-1])
            plus = (xs + (t * v).astype(dtype)).astype(np.float64) - x
            minus = (xs - (t * v).astype(dtype)).astype(np.float64) - x
            lp = self.replay(plan, objective, {info.order: plus})
            lm = self.replay(plan, objective, {info.order: minus})
            # the effective step after rounding the perturbed parameter to its dtype
            t_eff = float((plus[idx] - minus[idx]) / (2.0 * v[idx])) if idx is not None else t
            tv = t_eff * v[nz]
            skew = float(np.max(np.maximum(np.abs(plus[nz] - tv), np.abs(minus[nz] + tv)) / np.abs(tv), initial=0.0))
            if not math.isfinite(lp):
                deltas[k] = plus
            elif not math.isfinite(lm):
                deltas[k] = minus
            return judge.StepResult(t_eff, lp, lm, skew)

        return measure, deltas

    def emit_param_findings(self, info: ArrayInfo, res: dict[str, Any], path: str, line: int) -> None:
        if res["verdict"] == judge.FAIL:
            ratio = res.get("ad_fd_ratio")
            err = res.get("max_rel_err")
            parts = [f"autodiff gradient of `{info.name}` disagrees with finite differences ({res['signature']})"]
            if ratio is not None:
                parts.append(f"AD/FD ratio {ratio:.4g}")
            if err is not None:
                parts.append(f"max relative error {err:.3g}")
            if res.get("reason"):
                parts.append(res["reason"])
            self.add_finding("WF901", path, line, "; ".join(parts), ("WF901", path, line, info.name),
                             param=info.name, signature=res["signature"], ad_fd_ratio=ratio, max_rel_err=err)  # fmt: skip
        elif res["verdict"] == judge.UNRELIABLE:
            msg = f"finite differences cannot judge the gradient of `{info.name}`: {res.get('reason', '')}"
            self.add_finding("WF904", path, line, msg, ("WF904", path, line, info.name), param=info.name)


def distinct_digits(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with the fewest significant digits (7 at least) that tell them apart: a replay
    that departs in the 8th digit must not read "271.5598 instead of 271.5598"."""
    for digits in range(7, 18):
        fa, fb = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if fa != fb:
            return fa, fb
    return repr(a), repr(b)


def relative_difference(a: float, b: float) -> str:
    """", relative difference 3.1e-08" when both are finite and differ, else nothing."""
    if a == b or not (math.isfinite(a) and math.isfinite(b)):
        return ""
    return f", relative difference {abs(a - b) / max(abs(a), abs(b)):.2g}"


def _unjudged(info: ArrayInfo, reason: str) -> dict[str, Any]:
    """The verdict on a parameter FD could not judge."""
    return {"name": info.name, "max_rel_err": None, "ad_fd_ratio": None, "signature": "",
            "verdict": judge.UNRELIABLE, "reason": reason}  # fmt: skip


def _sample_json(sample: judge.SampleJudgement, steps: list[judge.StepResult]) -> dict[str, Any]:
    """One perturbation as the JSON report gives it: what autodiff and FD said, the verdict on it, and the FD
    value at each step of its ladder (non-finite numbers as strings: JSON has none)."""
    return {
        "kind": sample.kind,
        "index": sample.index,
        "ad": sample.ad,
        "fd": sample.fd,
        "status": sample.status,
        "reason": sample.reason,
        "steps": [[s.t, s.fd] for s in steps],
    }
