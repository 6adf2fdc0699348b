"""The IDs only ``warpfix verify`` reports (WF804, WF901-WF905): their documentation for
``warpfix rules``, in the sections of the static rules' docs. The catalog is docs/RULES.md."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RuntimeRule:
    id: str
    name: str
    severity: str
    what: str
    why: str
    instead: str

    def render_doc(self) -> str:
        return (
            f"# {self.id} {self.name} ({self.severity}, fix: none; reported by `warpfix verify`)\n\n"
            f"## What it does\n{self.what}\n\n## Why is this bad?\n{self.why}\n\n"
            f"## What to do\n{self.instead}\n\n## Fix safety\nDiagnostic only: `warpfix verify` runs the "
            "program, it does not edit it. Where a static rule names the shape, the finding says which "
            "(`classified_as` in the JSON), and `warpfix apply` fixes that rule's findings.\n"
        )


RUNTIME_RULES = (
    RuntimeRule(
        "WF804", "adjoint-mismatch", "error",
        "Checks every `@wp.func_grad` the taped kernels use against finite differences of its own "
        "forward `@wp.func`, on sampled inputs.",
        "A hand-written adjoint that disagrees with its forward makes every gradient through it wrong, "
        "silently: Warp uses it instead of differentiating the function.",
        "Fix the adjoint so that it accumulates the derivative of the forward (the report says where and "
        "by what factor it is off).",
    ),
    RuntimeRule(
        "WF901", "gradient-mismatch", "error",
        "Compares the gradient `tape.backward(loss)` computes with finite differences of the program's own "
        "objective, for each parameter of the first training iteration.",
        "The optimizer follows a wrong gradient. The message names the signature (all-zero, NaN/inf, a "
        "constant factor such as 2x, sparse, dense, or only across windows: truncation), which points at "
        "the bug's shape.",
        "Run `warpfix check` for the static finding that explains it; otherwise look for overwritten "
        "recorded arrays, missing `requires_grad` and per-window tapes.",
    ),
    RuntimeRule(
        "WF902", "mutated-after-record", "error",
        "Detects an array recorded on a tape that changed between the end of recording and its backward, "
        "directly or through an alias.",
        "Backward replays the recorded launches with the values they read; a changed input makes the "
        "adjoints of those launches wrong.",
        "Write into a fresh buffer instead of the recorded one (see WF101-WF108, WF303).",
    ),
    RuntimeRule(
        "WF903", "accumulated-grad", "error",
        "Detects a parameter whose `.grad` is already non-zero when a backward meant to be fresh starts; and, "
        "at the line that reads it, a gradient an earlier backward produced and the program consumed, summed "
        "into by the next backward without a zero in between, then consumed again.",
        "Gradients of successive iterations add up: the optimizer steps with the sum of every past gradient.",
        "Call `tape.zero()` (or zero the gradients) after each optimizer step (WF301).",
    ),
    RuntimeRule(
        "WF904", "fd-unreliable", "warning",
        "Says why finite differences cannot judge a gradient here: float32 cancellation, a stochastic "
        "forward, chaotic dynamics, kinks.",
        "A verdict from unreliable finite differences would be noise; no verdict is given instead.",
        "Verify with a smaller program, fewer steps, float64, or a fixed random seed.",
    ),
    RuntimeRule(
        "WF905", "tracker-warning", "warning",
        "Reports the warnings of Warp's own overwrite tracker (`wp.config.verify_autograd_array_access`), "
        "mapped to the launch site that caused them.",
        "The tracker sees an array read by a recorded launch and written afterwards: the backward of the "
        "reading launch may use the new values.",
        "Use a fresh buffer for the write (see WF101-WF108).",
    ),
)
RUNTIME_IDS = tuple(r.id for r in RUNTIME_RULES)


def runtime_rule(rule_id: str) -> RuntimeRule | None:
    key = rule_id.upper()
    return next((r for r in RUNTIME_RULES if r.id == key or r.name == rule_id), None)
