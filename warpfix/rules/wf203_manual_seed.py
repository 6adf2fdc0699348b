"""WF203 manual-seed: backward seeded by hand (`x.grad.fill_(1.0)`; `tape.backward(grads=...)`) without
the loss kernel on the tape: the seed of ones differentiates the *sum*; a mean objective needs
`1/N`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity
from warpfix.model import Project, SourceFile
from warpfix.model.facts import Buffer, Event, Trace
from warpfix.model.tapeflow import line_ref, outputs, same, tape_of, touches
from warpfix.rules.base import Example, Rule, RuleDoc


def _seed_value(node: ast.expr | None, src_of: dict[str, ast.expr]) -> float | None:
    """The constant a seed expression fills with: ``1.0``, ``wp.ones(n)``, ``wp.ones_like(y)``,
    ``wp.full(n, 0.5)``, ``wp.array(np.ones(n))``; a name is followed to its assignment."""
    if node is None:
        return None
    if isinstance(node, ast.Name) and node.id in src_of:
        return _seed_value(src_of[node.id], {})
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(node, ast.Call):
        func = node.func
        fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if fname in ("ones", "ones_like"):
            return 1.0
        if fname in ("full", "full_like"):
            val = next((kw.value for kw in node.keywords if kw.arg in ("value", "fill_value")), None)
            if val is None and len(node.args) > 1:
                val = node.args[1]
            return _seed_value(val, src_of)
        if fname == "array" and node.args:
            return _seed_value(node.args[0], src_of)
    return None


def _assignments(src: SourceFile) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in src.nodes_of(ast.Assign):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
    return out


class ManualSeed(Rule):
    id = "WF203"
    name = "manual-seed"
    severity = Severity.WARNING
    fix_safety = FixSafety.NONE
    fix_description = "none: reduce to a scalar loss on the tape, or scale the seed to the objective"
    doc = RuleDoc(
        what=(
            "Flags a backward pass seeded by hand with a constant of ones — `out.grad.fill_(1.0)` followed by "
            "`tape.backward()`, or `tape.backward(grads={out: wp.ones_like(out)})` — where `out` is a "
            "per-element output, not a scalar loss reduced on the tape, while the program itself averages "
            "that output (`np.mean(out.numpy())`, `out.numpy().mean()`): the objective it reports is a mean. "
            "A seed of ones with no such average is taken to be a deliberate vector-Jacobian product."
        ),
        why=(
            "A seed of ones differentiates `sum(out)`. If the objective is a mean (or any weighted "
            "reduction) the gradient is off by a factor of N (or the weights), with no warning. Put the "
            "loss kernel on the tape and call `tape.backward(loss)`, or scale the seed explicitly."
        ),
        example="""
with tape:
    wp.launch(residual, dim=n, inputs=[q, target], outputs=[r])
r.grad.fill_(1.0)   # differentiates sum(r), not mean(r)
tape.backward()
print("mse", np.mean(r.numpy()))
""",
        use_instead="""
with tape:
    wp.launch(residual, dim=n, inputs=[q, target], outputs=[r])
    wp.launch(mean_loss, dim=n, inputs=[r, 1.0 / n], outputs=[loss])
tape.backward(loss)
""",
        fix="None: only the author knows which objective is meant; the message says which one the seed implies.",
    )
    _PRE = """
import numpy as np
import warp as wp


@wp.kernel
def residual(q: wp.array(dtype=float), target: wp.array(dtype=float), r: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    r[i] = d * d


@wp.kernel
def mean_loss(r: wp.array(dtype=float), inv_n: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, r[i] * inv_n)


n = 128
q = wp.array(np.random.rand(n), dtype=float, requires_grad=True)
target = wp.zeros(n, dtype=float)
r = wp.zeros(n, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(residual, dim=n, inputs=[q, target], outputs=[r])
"""
    VALID = [
        Example(
            _PRE
            + """    wp.launch(mean_loss, dim=n, inputs=[r, 1.0 / n], outputs=[loss])
tape.backward(loss)
""",
            note="scalar loss kernel on the tape",
        ),
        Example(
            _PRE
            + """    wp.launch(mean_loss, dim=n, inputs=[r, 1.0 / n], outputs=[loss])
tape.backward(grads={loss: wp.array([1.0], dtype=float)})
""",
            note="a seed of one on the scalar loss is what tape.backward(loss) does",
        ),
        Example(
            _PRE + 'r.grad.fill_(1.0 / n)\ntape.backward()\nprint("mse", np.mean(r.numpy()))\n',
            note="an explicitly scaled seed",
        ),
        Example(
            _PRE + "tape.backward(grads={r: wp.ones_like(r)})\nprint(q.grad.numpy())\n",
            note="a vector-Jacobian product: nothing says the objective is a mean",
        ),
    ]
    INVALID = [
        Example(_PRE + 'r.grad.fill_(1.0)  # expect: WF203\ntape.backward()\nprint("mse", np.mean(r.numpy()))\n'),
        Example(
            _PRE + 'tape.backward(grads={r: wp.ones_like(r)})  # expect: WF203\nprint("mse", r.numpy().mean())\n'
        ),
    ]

    def begin(self, project: Project) -> None:
        self._names: dict[str, dict[str, ast.expr]] = {}  # path -> its assignments (read once per file)
        self._averaged: dict[str, set[str]] = {}  # path -> names averaged in it

    def _file_names(self, project: Project, path: str) -> dict[str, ast.expr]:
        if path not in self._names:
            src = project.files.get(path)
            self._names[path] = _assignments(src) if src is not None else {}
        return self._names[path]

    def _seed(self, project: Project, path: str, node: ast.expr | None) -> float | None:
        """The seed's value; the file's assignments are read only when the seed names something."""
        named = node is not None and any(isinstance(n, ast.Name) for n in ast.walk(node))
        return _seed_value(node, self._file_names(project, path) if named else {})

    def _file_averaged(self, project: Project, path: str) -> set[str]:
        # the objective is averaged where the seed is made: a `mean` in another file says nothing about it
        if path not in self._averaged:
            src = project.files.get(path)
            self._averaged[path] = _averaged_names(src) if src is not None else set()
        return self._averaged[path]

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        events = trace.events
        for idx, ev in enumerate(events):
            if (
                ev.kind == "grad_zero"
                and ev.detail.get("method") == "fill_"
                and isinstance(ev.node, ast.Call)
            ):
                owner = next((b.grad_of for b in ev.writes if b.grad_of is not None), None)
                value = self._seed(project, trace.path, ev.node.args[0] if ev.node.args else None)
                bwd = next(
                    (
                        e
                        for e in events[idx + 1 :]
                        if e.kind == "backward" and not e.reads and not e.detail.get("grads")
                    ),
                    None,
                )
                if owner is not None and bwd is not None:
                    label = ev.name_of(ev.writes[0]).removesuffix(".grad")
                    averaged = self._file_averaged(project, ev.span.path)
                    yield from self._judge(events, ev, owner, label, value, bwd.tape, averaged)
            elif ev.kind == "backward" and ev.detail.get("grads") and isinstance(ev.node, ast.Call):
                grads = next((kw.value for kw in ev.node.keywords if kw.arg == "grads"), None)
                if not isinstance(grads, ast.Dict):
                    continue
                for key, val in zip(grads.keys, grads.values, strict=True):
                    if key is None:
                        continue
                    owner = _buffer_named(events[:idx], ast.unparse(key), ev.tape)
                    if owner is not None:
                        averaged = self._file_averaged(project, ev.span.path)
                        yield from self._judge(
                            events, ev, owner, ast.unparse(key), self._seed(project, trace.path, val), ev.tape, averaged
                        )

    def _judge(
        self,
        events: list[Event],
        seed: Event,
        owner: Buffer,
        label: str,
        value: float | None,
        tape: int | None,
        averaged: set[str],
    ) -> Iterator[Finding]:
        if value != 1.0 or label not in averaged:
            return  # unknown (an external grad_output), deliberately scaled, or a vector-Jacobian product
        writers = [e for e in events if e.recorded and tape_of(e) == tape and touches(outputs(e), owner)]
        if not writers or all(_is_scalar_reduction(w, owner) for w in writers):
            return
        size = _size_text(events, owner)
        writer = writers[-1]
        mean = f"1/{size}" if size else "1/N"
        yield self.finding(
            seed.span,
            f"backward is seeded by hand with ones on `{label}` (written per element by "
            f"{_kernel_label(writer)} at {line_ref(writer.span, seed.span)}), not on a scalar loss: this "
            f"differentiates sum({label}){f' over {size} elements' if size else ''}, but the program averages "
            f"`{label}`: the gradient of the mean needs a seed of {mean}",
            data={"array": label, "seed": value, "implied_objective": f"sum({label})", "size": size},
            related=((writer.span, "written here"),),
        )


_MEANS = frozenset({"mean", "average", "nanmean"})


def _averaged_names(src: SourceFile) -> set[str]:
    """Expressions the file averages: the names/attributes inside ``np.mean(...)``/``x.mean()`` calls."""
    out: set[str] = set()
    if "mean" not in src.text and "average" not in src.text:  # no such call: the file's nodes are not walked
        return out
    for node in src.nodes_of(ast.Call):
        func = node.func
        fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if fname in _MEANS:
            out.update(ast.unparse(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute)))
    return out


def _kernel_label(ev: Event) -> str:
    if ev.kind == "launch":
        return f"`{ev.kernel.name if ev.kernel else ev.detail.get('kernel', '?')}`"
    return f"`wp.{ev.kind}`"


def _buffer_named(events: list[Event], text: str, tape: int | None) -> Buffer | None:
    for ev in reversed(events):
        if tape_of(ev) != tape:
            continue
        for buf in ev.writes + ev.reads:
            if ev.names.get(buf.id) == text:
                return buf
    return None


def _is_scalar_reduction(ev: Event, owner: Buffer) -> bool:
    """Whether ``ev`` writes ``owner`` only at a constant index (a reduction into a scalar loss)."""
    if ev.kind != "launch" or ev.kernel is None:
        return False
    params = [p for p, b in ev.binding.items() if same(b, owner)]
    if not params:
        return False
    for p in params:
        facts = ev.kernel.params[p]
        writes = [a for a in facts.accesses if a.kind != "read"]
        if not writes or any(not a.index.strip().isdigit() for a in writes):
            return False
    return True


def _size_text(events: list[Event], owner: Buffer) -> str | None:
    alloc = next(
        (
            e
            for e in events
            if e.kind in ("alloc", "clone") and e.writes and e.writes[0].id == owner.root().id
        ),
        None,
    )
    if (
        alloc is None
        or not isinstance(alloc.node, ast.Call)
        or alloc.detail.get("alloc")
        not in (
            "zeros",
            "empty",
            "ones",
            "full",
        )
    ):
        return None
    shape = (
        alloc.node.args[0]
        if alloc.node.args
        else next((k.value for k in alloc.node.keywords if k.arg == "shape"), None)
    )
    return ast.unparse(shape) if shape is not None else None
