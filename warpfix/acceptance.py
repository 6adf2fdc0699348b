"""Whether ``apply --check`` keeps an edit: the verifier runs before and after it, and which proof decides.

:func:`fd_summary` reduces a verify report to what the decision needs; :func:`judge` decides. An edit is
kept only when the forward is preserved (every loss the two runs compute before their first parameter
update) and one of these proves it:

* FD disagreed (or could not judge: no backward reached a leaf parameter) before the edit and agrees after it;
* FD agreed before and after *and* the edit left every checked gradient unchanged (the sketches of
  :mod:`warpfix.verify.sketch`): when the gradient changed, FD accepted two different gradients and
  cannot tell which is right, so that is no proof -- unless FD along the direction the gradient moved
  (:mod:`warpfix.verify.discriminate`) sides with the edit's gradient, which proves it (sides with the
  original's: the edit is dropped); when FD compares other parameters after the edit, only a program
  that now trains those, with FD agreeing after the first update, is proven;
* the runtime checks (an array changed before its backward, a stale gradient, an array without a
  gradient that cuts the chain to the loss, a gradient read before its backward, a launch the objective
  depends on recorded on another tape than the backward's) found the edit's arrays (or launches)
  before it and not after, where FD cannot judge (chaos, a NaN-prone solve) or cannot tell (the same
  gradient changed), or where FD disagreed before the edit and still does, like with like, and now agrees
  at a backward where it disagreed (:func:`_like_with_like`): FD rejecting the rewritten program as it did
  the original is no proof, whatever finding went away.

A WF601 hoist merges the windows' backwards into one. Their total loss is the forward compared; where the
windows added into one loss array, zeroed once before them (the probe marks each backward whose loss array
only taped launches wrote since the previous one), each backward saw the running sum and the one backward
after the merge differentiates the last of them, which must be unchanged. The probe runs the first
iteration's backwards past its cap for their loss alone, so the last one is the iteration's.

A backward whose objective the program seeds by hand (``x.grad`` set, ``backward(grads=...)``) after the
first backward of the iteration differentiates what earlier backwards left there (checkpoint segments
seeded with the next segment's gradients): its value is no forward value and its gradient is no like for
like between two runs whose earlier backwards differ, so neither is compared.

An edit that moves the program's first parameter update earlier (an optimizer step taken out of the
tape) shortens the first iteration; the losses after that update legitimately differ (the run before
trained on another gradient), so every backward the verifier checked after it must pass FD on its own,
and FD must have checked one. The same holds for any WF302 edit: what it changes is what the update
consumes. Where FD cannot judge such an edit, the runtime check of early gradient reads may prove it
instead (the update no longer reads a gradient before the backward that produces it); no other runtime
check proves an edit that moved the update. Only the fixes that can move the update (WF302-WF304) are read this
way: after any other fix, fewer backwards before the first update mean the verifier recognises the iteration's
end earlier, and the backwards both runs have are compared like with like.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from warpfix.verify.discriminate import verdict_of
from warpfix.verify.sketch import change

#: runtime checks that a recorded array kept its values until its backward (mutated-after-record, the
#: overwrite tracker): they judge an overwrite fix where finite differences cannot (chaotic programs)
INTEGRITY_RULES = ("WF902", "WF905")
#: the fixes that may merge or split backwards (the WF601 hoist: one tape over the windows), judged on the
#: iteration's total loss; any other fix that changes how many backwards precede the first parameter update
#: is judged on the backwards both runs have
MERGING_FIXES = ("WF601",)
#: the fixes that move work out of the tape, after its backward (an optimizer step that read the gradient before
#: the backward produced it): what they change is what the update consumes, which only the backwards after the
#: first parameter update show, so FD must check one of those
STEP_FIXES = ("WF302",)
#: the fixes that remove an overwrite of a recorded array
OVERWRITE_FIXES = ("WF101", "WF102", "WF103", "WF104", "WF105", "WF106", "WF107", "WF108", "WF303", "WF401")
#: runtime finding -> the fixes whose effect it observes, per array: where FD cannot judge, such a fix is
#: proven when the findings about its arrays go away (the overwrite checks; WF903, a gradient already
#: non-zero when the next iteration's backward starts, for the missing zero)
RUNTIME_PROOF = {
    "WF902": OVERWRITE_FIXES, "WF905": OVERWRITE_FIXES, "WF903": ("WF301",),
    # the runtime WF201 (verify/cut_chain.py): an array without a gradient between a parameter and the loss
    "WF201": ("WF201",),
    # the early-gradient reads (verify/early_grad.py): inside the tape block (WF302), after it and before
    # its backward (WF304; a WF303 edit moves such a statement, a write that reads a gradient, too)
    "WF302": ("WF302",), "WF304": ("WF303", "WF304"),
    # the runtime WF601 (verify/tape_cover.py): a launch the objective depends on, recorded on another tape
    "WF601": ("WF601",),
}
#: the fixes that may move the program's first parameter update (an optimizer step out of the tape, a gradient
#: read moved after its backward); any other fix that leaves fewer backwards before it has not moved it, the
#: verifier recognises the iteration's end earlier (newton's cloth with its states aliased: the parameter the
#: program updates is overwritten on the tape, so no backward looked like the end of an iteration)
UPDATE_MOVING_FIXES = (*STEP_FIXES, "WF303", "WF304")
#: the runtime checks that may prove an edit that moved the first parameter update (see the module docstring)
EARLY_READ_RULES = ("WF302", "WF304")
LOSS_RTOL = 1e-4  # the forward must not change: float32 reordering stays far below this
LOSS_ATOL = 1e-7
#: a gradient whose sketch moved by at most this fraction of its norm is unchanged (float32 reordering)
GRAD_RTOL = 1e-5


def judge(before: dict[str, Any], after: dict[str, Any], rules: Sequence[str] = ()) -> tuple[bool, str]:
    """Whether an edit is proven by the verifier runs around it, and why (not) — see the module docstring.

    ``rules``: the rules of the edit's findings (the runtime checks prove only the fixes they observe).
    """
    if after["verdict"] == "error":
        return False, f"the rewritten program could not be verified: {after['error']}"
    ok, loss, moved = _forward_preserved(before, after, rules)
    if not ok:
        return False, loss
    proof = _runtime_proof(before, after, rules, EARLY_READ_RULES if moved else None) if rules else None
    if after["verdict"] == "unreliable" and proof:
        return True, f"{loss}; FD is unreliable here, so {proof}"
    if after["verdict"] == "fail" and before["verdict"] == "fail" and not moved:
        ok, why = _like_with_like(before, after, proof)
        if ok or why:
            return ok, f"{loss}; {why}" if ok else why
    if after["verdict"] != "pass":
        what = {"fail": "FD still disagrees", "none": "no gradient was compared",
                "unreliable": "FD is unreliable here"}[after["verdict"]]
        if after["verdict"] == "fail" and after.get("integrity"):
            what += f" ({', '.join(after['integrity'])}: a recorded array still changes before its backward)"
        return False, f"{what} after the edit"
    if moved:
        ok, loss = _after_the_moved_update(after, loss, len(after["losses"]))
        if not ok:
            return False, loss
    elif any(r in STEP_FIXES for r in rules):
        if not after.get("later"):
            return False, ("the edit moves work after the backward (what the parameter update consumes) and FD "
                           "checked no backward after the first update: nothing shows the training after it right")
        loss += f" and FD agreed at the {len(after['later'])} backward(s) checked after the first parameter update"
    if before["verdict"] != "pass":
        # a run that failed by a runtime finding alone (FD agreed): say which check the edit satisfied
        return True, f"{loss}; FD agreement now passes" + (f" and {proof}" if proof else "")
    state, how = _compare_gradients(before, after, rules)
    if state == "same":
        return True, f"{loss}; FD agreed before and after, and {how}"
    along = verdict_of(after.get("discriminated") or []) if state == "changed" else None
    if along is not None:
        return along[0], f"{loss}; FD agreed before and after but {how}; {along[1]}" if along[0] else along[1]
    if state == "changed" and proof:
        return True, f"{loss}; FD agreed before and after but {how}, so FD cannot tell which is right: {proof}"
    if state == "changed":
        return False, f"FD agreed before and after, but {how}: FD accepts both gradients, so it cannot tell which is right"
    # other parameters compared (the tape's leaves changed) or none: FD on both sides says nothing of the edit,
    # and the runtime checks only that an overwrite went away
    return False, f"FD agreed before and after, but {how}, so nothing shows what the edit did to the gradient"


def _forward_preserved(before: dict[str, Any], after: dict[str, Any],
                       rules: Sequence[str]) -> tuple[bool, str, bool]:
    """(True, what was compared, whether the edit moved the first parameter update earlier) when the edit kept
    the forward; (False, why not, False) otherwise."""
    lb, la = before["losses"], after["losses"]
    if None in lb or None in la:
        return False, "a checked backward has no loss value to compare", False
    if len(lb) == len(la):
        seeded = _seeded(before, after)
        for i, (a, b) in enumerate(zip(lb, la, strict=True)):
            if i not in seeded and not _close(a, b):
                return False, f"the loss changed at backward {i + 1} ({a} -> {b}): the forward is not preserved", False
        skipped = f" ({len(seeded)} objective(s) seeded by hand after the first backward not compared)" if seeded else ""
        return True, f"loss unchanged{skipped}", False
    if not rules or any(r in MERGING_FIXES for r in rules):
        # backwards merged or split (one tape over the windows, WF601): the iteration's objective
        # is the sum of what was differentiated, and that must not change
        # -- or, where every backward after the first is seeded by hand (``costs.grad.fill_(1.0)``, newton's
        # drone), the last one's: the windows add into the seeded arrays, so each backward saw the running sum
        a, b = math.fsum(lb), math.fsum(la)
        if _close(a, b):
            return True, f"total loss of {len(lb)} -> {len(la)} backwards unchanged", False
        seeded = before.get("seeded") or []
        if 1 < len(lb) <= len(seeded) and all(seeded[1:len(lb)]) and la and _close(lb[-1], la[-1]):
            return True, (f"the objective seeded by hand that {len(lb)} backwards added into unchanged at the last "
                          f"({lb[-1]} -> {la[-1]}, {len(la)} backward(s))"), False
        if _running_sums(before) and len(la) == 1 and _close(lb[-1], la[0]):
            return True, (f"the episode loss {len(lb)} backwards saw accumulate (running sums) unchanged at the "
                          f"last ({lb[-1]} -> {la[0]}, one backward)"), False
        return False, f"the edit changed the backwards ({len(lb)} -> {len(la)}) and their total loss ({a} -> {b})", False
    # the same iterations compared, like with like: the first iteration ends at its first parameter update,
    # and a fix that makes the program train (an optimizer step moved out of the tape) ends it earlier, so
    # fewer backwards precede it; each backward both runs have must match
    if not lb or not la:
        return False, f"the edit changed the backwards ({len(lb)} -> {len(la)}): none to compare", False
    if len(la) > len(lb):
        # the rewritten program updates its parameters later or never (a parameter rebound away from the
        # optimizer that holds it): it no longer trains as it did
        return False, (f"the edit delays or removes the first parameter update ({len(lb)} -> {len(la)} "
                       "backwards before it): the program no longer trains as it did"), False
    for i, (a, b) in enumerate(zip(lb, la, strict=False)):
        if not _close(a, b):
            return False, f"the loss changed at backward {i + 1} ({a} -> {b}): the forward is not preserved", False
    if rules and not any(r in UPDATE_MOVING_FIXES for r in rules):
        return True, (f"loss unchanged at the {len(la)} backward(s) both runs have before the first parameter update "
                      f"({len(lb)} -> {len(la)}; a {'/'.join(sorted(set(rules)))} fix moves no optimizer step: the "
                      "iteration is recognised to end earlier)"), False
    return True, f"the edit moved the first parameter update ({len(lb)} -> {len(la)} backwards before it)", True


def _running_sums(before: dict[str, Any]) -> bool:
    """Whether the run's backwards before its first parameter update saw the running sums of one loss: each
    differentiated the loss array the previous one did, written between them only by taped kernel launches
    (the probe's ``running``: zeroed once, before them), and its values never fell. Then the last one's is
    the iteration's objective, which one backward after the windows (WF601's hoist) differentiates whole."""
    losses, running = before["losses"], before.get("running") or []
    return (1 < len(losses) == len(running) and all(running[1:]) and not any(before.get("seeded") or [])
            and all(b >= a - max(abs(a) * LOSS_RTOL, LOSS_ATOL) for a, b in zip(losses, losses[1:], strict=False)))


def _after_the_moved_update(after: dict[str, Any], moved: str, loss_count: int) -> tuple[bool, str]:
    """After an update the edit moved earlier, the run before the edit trained on another gradient (or not
    at all), so its losses say nothing there: each backward after the update must pass FD on its own (the
    verdict of a run that passes covers every backward FD checked), and FD must have checked one."""
    later = after.get("later") or []
    if not later:
        return False, f"{moved} and FD checked no backward after it: nothing shows the training after it right"
    return True, (f"loss unchanged at the {loss_count} backward(s) before the first parameter update ({moved}) "
                  f"and FD agreed at each of the {len(later)} backward(s) checked after it")


def _seeded(before: dict[str, Any], after: dict[str, Any]) -> set[int]:
    """Indices of the first iteration's backwards seeded by hand after its first backward, in either run."""
    return {i for side in (before, after) for i, s in enumerate(side.get("seeded") or []) if s}


def _like_with_like(before: dict[str, Any], after: dict[str, Any], proof: str | None) -> tuple[bool, str | None]:
    """FD disagreed before the edit and still does. Compared like with like -- the backwards before the first
    parameter update, those seeded by hand after the first backward aside (the later ones start from other
    parameters) -- the edit is proven when FD now agrees at one of them where it disagreed, or when it still
    disagrees only where it did before, on gradients the edit left unchanged (the program's own disagreement,
    not the edit's), FD now agrees at a backward seeded by hand where it disagreed, and the runtime checks
    decided (``proof``). Without a backward FD now accepts, the runtime checks alone prove nothing here: FD
    still rejects the gradient (a ``tape.zero()`` per window leaves what each backward adds unchanged and
    the sum the program consumes wrong). (False, None): no proof either way."""
    vb, va = before.get("first_verdicts") or [], after.get("first_verdicts") or []
    gb, ga = before.get("gradients") or [], after.get("gradients") or []
    seeded = _seeded(before, after)
    compared = [i for i in range(min(len(vb), len(va), len(gb), len(ga))) if i not in seeded]
    # (backward before, backward after) that differentiate the same objective: the same index, or, where one
    # backward after the windows replaced the windows' backwards of a running sum (WF601's hoist), the last
    # window's (the episode loss, on its truncated tape) and the one after
    pairs = [(i, i) for i in compared]
    if len(va) == 1 and len(vb) > 1 and len(gb) == len(vb) and ga and not seeded and _running_sums(before):
        pairs = [(len(vb) - 1, 0)]
    mended = []
    for i, j in pairs:
        if va[j] == "fail" and vb[i] != "fail":
            return False, f"FD still disagrees after the edit, at backward {j + 1} where it agreed before"
        if va[j] == "fail":
            common = set(gb[i]) & set(ga[j])
            if not common or any(change(gb[i][n], ga[j][n]) > GRAD_RTOL for n in common):
                return False, f"FD still disagrees after the edit, at backward {j + 1}, on a gradient the edit changed"
        elif vb[i] == "fail" and va[j] == "pass":
            mended.append(j + 1)
    if mended:
        return True, f"FD agreement now passes at backward(s) {', '.join(map(str, mended))}"
    if not proof:
        return False, None
    # FD agrees nowhere it disagreed before: unchanged gradients per backward cannot show a zero between
    # backwards right (what the program sums and consumes changes, what each backward adds does not), and the
    # runtime checks show a finding gone, not the gradient right. A backward seeded by hand that FD now accepts
    # (checkpoint segments seeded with the summed gradients before the edit) is FD's own evidence.
    healed = [str(i + 1) for i in sorted(seeded) if i < min(len(vb), len(va)) and vb[i] == "fail" and va[i] == "pass"]
    if not healed:
        return False, ("FD still disagrees after the edit and agrees nowhere it disagreed before: the runtime checks "
                       "show a finding gone, not the gradient the program consumes right")
    failing = [str(j + 1) for _, j in pairs if va[j] == "fail"]
    where = f", at backward(s) {', '.join(failing)}, on gradients the edit left unchanged" if failing else ""
    return True, (f"FD disagreed before the edit too{where} (the program's own disagreement); it now agrees at the "
                  f"backward(s) {', '.join(healed)} seeded by hand, and {proof}")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=LOSS_RTOL, abs_tol=LOSS_ATOL)


def _runtime_proof(before: dict[str, Any], after: dict[str, Any], rules: Sequence[str],
                   only: Sequence[str] | None = None) -> str | None:
    """What the runtime checks prove of an edit, or None: an overwrite fix that takes the integrity
    findings from some to none, or any fix that removes the findings about its arrays and adds none.
    ``only``: the runtime rules that may decide (an edit that moved the first parameter update)."""
    found, left = before.get("integrity") or [], after.get("integrity") or []
    other_errors = set(after.get("runtime_findings") or []) - set(INTEGRITY_RULES)
    if only is None and all(r in OVERWRITE_FIXES for r in rules) and found and not left and not other_errors:
        return (f"the runtime integrity check decided: {', '.join(found)} before the edit, clean after "
                "(no recorded array changes before its backward)")
    # findings the program had before the edit about other arrays (an overwrite it makes on purpose, under
    # its own custom adjoint) stay: the edit must remove some of them, about its arrays, and add none
    proving = {r for r, fixes in RUNTIME_PROOF.items() if all(x in fixes for x in rules) and (only is None or r in only)}
    was = {k for k in before.get("integrity_arrays") or [] if k.split()[0] in proving}
    now = {k for k in after.get("integrity_arrays") or [] if k.split()[0] in proving}
    # no runtime error the program did not have before, other than those the edit is judged by
    other_errors = set(after.get("runtime_findings") or []) - proving - set(before.get("runtime_findings") or [])
    if was and now < was and not other_errors:
        if proving <= set(EARLY_READ_RULES) and not _update_moved_the_loss(after):
            # the read now follows the backward, but it may read a gradient zeroed already (moved past
            # tape.zero()): the next iteration's loss must show that the update changed the parameters
            return None
        remain = f"; {', '.join(sorted(now))} (there before the edit too) remain" if now else ""
        return f"the runtime checks decided: the edit removed {', '.join(sorted(was - now))} and added none{remain}"
    return None


def _update_moved_the_loss(after: dict[str, Any]) -> bool:
    """Whether the first backward after the first parameter update has another loss than the first backward."""
    first, later = after.get("losses") or [], after.get("later_losses") or []
    return bool(first and later) and None not in (first[0], later[0]) and not _close(first[0], later[0])


def _compare_gradients(before: dict[str, Any], after: dict[str, Any], rules: Sequence[str]) -> tuple[str, str]:
    """Whether every gradient FD checked before the edit, at the backwards both runs have before their first
    parameter update, has the same sketch after it: ("same", what was compared), ("changed", the first
    difference), or ("unknown", why they cannot be compared).

    A parameter checked before and not after is no change the edit hid only when the program now trains
    other parameters (the probe compares the trained ones) and FD agreed after the first update too."""
    gb, ga = before.get("gradients") or [], after.get("gradients") or []
    if len(gb) != len(ga) and (not rules or any(r in MERGING_FIXES for r in rules)):
        return "unknown", f"the edit merged or split the backwards ({len(gb)} -> {len(ga)}): their gradients are not alike"
    compared, missing = 0, []
    for i, (was, now) in enumerate(zip(gb, ga, strict=False)):
        for name, sketch in was.items():
            if name not in now:
                missing.append((i, name))
                continue
            moved = change(sketch, now[name])
            if moved > GRAD_RTOL:
                size = "cannot be compared" if math.isinf(moved) else f"moved by {moved:.2g} of its norm"
                return "changed", f"the edit changed the gradient of `{name}` at backward {i + 1} ({size})"
            compared += 1
    later = after.get("later") or []
    if missing:
        i, name = missing[0]
        if not later:
            return "unknown", f"the gradient of `{name}` at backward {i + 1} was checked before the edit and not after"
        now = ", ".join(f"`{n}`" for n in sorted(ga[i])) or "none"
        return "same", (f"the edit changed which parameters FD compares (`{name}` -> {now} at backward {i + 1}: the "
                        f"program trains others now), and FD agreed at the {len(later)} backward(s) checked after the "
                        "first update")
    if not compared:
        return "unknown", "no gradient checked in both runs can be compared"
    return "same", f"the edit left the {compared} checked gradient(s) unchanged"
