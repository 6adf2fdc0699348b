"""WF2xx — the gradient chain: arrays that silently drop out of it, kernels compiled without
an adjoint, and hand-made backward seeds (checklist §2)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model import Project, SourceFile
from warpfix.model.facts import Buffer, Event, KernelDef, Trace, exclusive
from warpfix.rules._tapeflow import (
    DIFFERENTIABLE,
    integer_param,
    is_integer_dtype,
    line_ref,
    outputs,
    same,
    tape_of,
    touches,
    true_reads,
)
from warpfix.rules.base import Example, Rule, RuleDoc

_FIT = """
import numpy as np
import warp as wp


@wp.kernel
def scale(x: wp.array(dtype=float), k: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = k[0] * x[i]


@wp.kernel
def sq_err(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


n = 64
x = wp.array(np.linspace(0.0, 1.0, n), dtype=float)
target = wp.array(3.0 * np.linspace(0.0, 1.0, n), dtype=float)
k = wp.array([1.0], dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""


def _alloc_events(trace: Trace) -> dict[int, Event]:
    return {ev.writes[0].id: ev for ev in trace.events if ev.kind in ("alloc", "clone") and ev.writes}


def _alloc_is_integer(alloc: Event | None) -> bool:
    if alloc is None or not isinstance(alloc.node, ast.Call):
        return False
    dtype = next((kw.value for kw in alloc.node.keywords if kw.arg == "dtype"), None)
    return dtype is not None and is_integer_dtype(dtype)


class MissingRequiresGrad(Rule):
    id = "WF201"
    name = "missing-requires-grad"
    severity = Severity.ERROR
    fix_safety = FixSafety.SAFE
    fix_description = "allocate the intermediate with `requires_grad=True`"
    doc = RuleDoc(
        what=(
            "Flags an intermediate array allocated without `requires_grad=True` (`wp.zeros`, `wp.empty`, "
            "`wp.full`, `wp.array`, or a `*_like`/`clone` of such an array, which inherits the flag) that a "
            "recorded op writes from inputs that need gradients and a later recorded op reads on the way "
            "to the loss."
        ),
        why=(
            "An array without a `.grad` buffer is a dead end for the adjoint: backward finds no gradient to "
            "propagate through it, so everything upstream (the parameters) silently gets zero gradient. "
            "Nothing warns; training just does not move."
        ),
        example=_FIT
        + """
y = wp.zeros(n, dtype=float)  # no requires_grad: the chain k -> y -> loss is cut
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)  # k.grad == 0
""",
        use_instead="y = wp.zeros(n, dtype=float, requires_grad=True)",
        fix="Safe: adding `requires_grad=True` allocates a gradient buffer; forward values are unchanged.",
        versions="All supported Warp versions: `wp.zeros/empty/full/array` default to `requires_grad=False`.",
    )
    VALID = [
        Example(
            _FIT
            + """
y = wp.zeros(n, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            note="every intermediate on the chain has a gradient; x and target are read-only constants",
        ),
        Example(
            """
import numpy as np
import warp as wp


@wp.kernel
def bin_particles(q: wp.array(dtype=wp.vec3), cell: wp.array(dtype=int)):
    i = wp.tid()
    cell[i] = int(q[i][0] * 4.0)


@wp.kernel
def cell_energy(q: wp.array(dtype=wp.vec3), cell: wp.array(dtype=int), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, float(cell[i]) * wp.length_sq(q[i]))


n = 32
q = wp.array(np.random.rand(n, 3), dtype=wp.vec3, requires_grad=True)
cell = wp.zeros(n, dtype=int)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(bin_particles, dim=n, inputs=[q], outputs=[cell])
    wp.launch(cell_energy, dim=n, inputs=[q, cell], outputs=[loss])
tape.backward(loss)
""",
            note="integer arrays carry no gradient",
        ),
        Example(
            _FIT
            + """
weights = wp.zeros(n, dtype=float)
y = wp.zeros(n, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, x], outputs=[weights])
    wp.launch(scale, dim=n, inputs=[weights, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            note="the producer of `weights` reads nothing that needs a gradient",
        ),
    ]
    INVALID = [
        Example(
            _FIT
            + """
y = wp.zeros(n, dtype=float)  # expect: WF201
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            expected_fix=_FIT
            + """
y = wp.zeros(n, dtype=float, requires_grad=True)  # expect: WF201
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
        ),
        Example(
            _FIT
            + """
y = wp.empty_like(x)  # expect: WF201
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            expected_fix=_FIT
            + """
y = wp.empty_like(x, requires_grad=True)  # expect: WF201
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=n, inputs=[x, k], outputs=[y])
    wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[loss])
tape.backward(loss)
""",
            note="`empty_like` inherits requires_grad=False from the constant x",
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        for trace in project.traces:
            yield from self._check_trace(trace)

    def _check_trace(self, trace: Trace) -> Iterator[Finding]:
        events = trace.events
        allocs = _alloc_events(trace)
        # Buffers that carry a gradient, or would if their allocation asked for one.
        carrying: set[int] = set()
        candidates: dict[int, tuple[int, Buffer]] = {}  # buffer id -> (index of the writer, buffer)
        for idx, ev in enumerate(events):
            if not ev.recorded or ev.kind not in DIFFERENTIABLE:
                continue
            if not any(b.root().requires_grad or b.root().id in carrying for b in true_reads(ev)):
                continue
            for out in outputs(ev):
                buf = out.root()
                if buf.requires_grad is True:
                    carrying.add(buf.id)
                    continue
                if buf.requires_grad is not False or not buf.fresh or buf.origin is None:
                    continue
                if integer_param(ev, out) or _alloc_is_integer(allocs.get(buf.id)):
                    continue
                carrying.add(buf.id)
                candidates.setdefault(buf.id, (idx, buf))
        for idx, buf in candidates.values():
            hit = self._reaches_loss(events, idx, buf)
            if hit is None:
                continue
            writer, reader, sink = events[idx], hit[0], hit[1]
            yield self.finding(
                buf.origin,  # type: ignore[arg-type]
                f"`{writer.name_of(buf)}` is allocated without `requires_grad=True` but is written from "
                f"differentiable inputs by {self._what(writer)} ({line_ref(writer.span, buf.origin)}) and read "  # type: ignore[arg-type]
                f"by {self._what(reader)} ({line_ref(reader.span, buf.origin)}) on the way to "  # type: ignore[arg-type]
                f"`{sink}`: backward stops here and everything upstream gets zero gradient",
                related=((writer.span, "written here"), (reader.span, "read here")),
            )

    @staticmethod
    def _what(ev: Event) -> str:
        if ev.kind == "launch":
            return f"`{ev.kernel.name if ev.kernel else ev.detail.get('kernel', '?')}`"
        return f"`wp.{ev.kind}`"

    @staticmethod
    def _reaches_loss(events: list[Event], start: int, buf: Buffer) -> tuple[Event, str] | None:
        """The first recorded reader of ``buf`` after ``events[start]`` from which data flows (on the
        tape) into an array with a gradient that a later backward of the same tape differentiates, and
        the name of that array (the backward's loss when the flow reaches it)."""
        writer = events[start]
        tape = tape_of(writer)
        losses = {
            b.root().id
            for e in events[start + 1 :]
            if e.kind == "backward" and e.tape == tape
            for b in e.reads
        }
        if not any(e.kind == "backward" and e.tape == tape for e in events[start + 1 :]):
            return None
        tainted = {buf.id}
        first_reader: Event | None = None
        sink: str | None = None
        for ev in events[start + 1 :]:
            if tape_of(ev) != tape or ev.kind not in DIFFERENTIABLE or exclusive(ev, writer):
                continue
            if not any(b.root().id in tainted for b in true_reads(ev)):
                continue
            first_reader = first_reader or ev
            for out in outputs(ev):
                root = out.root()
                if root.id in losses:
                    return first_reader, ev.name_of(out)
                if root.requires_grad is True and sink is None:
                    sink = ev.name_of(out)
                tainted.add(root.id)
        return (first_reader, sink) if first_reader is not None and sink is not None else None


# ---------------------------------------------------------------------------------------- WF202


def _is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _module_option_calls(src: SourceFile) -> Iterator[ast.Call]:
    """``wp.set_module_options({... "enable_backward": False ...})`` calls for the file's own module."""
    for node in src.nodes_of(ast.Call):
        if not src.is_warp(node.func, "set_module_options"):
            continue
        if any(kw.arg == "module" for kw in node.keywords) or len(node.args) > 1:
            continue
        opts = node.args[0] if node.args else None
        if isinstance(opts, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "enable_backward" and _is_false(v)
            for k, v in zip(opts.keys, opts.values, strict=True)
        ):
            yield node


def _config_assignments(src: SourceFile) -> Iterator[ast.Assign]:
    """Module-level ``wp.config.enable_backward = False``."""
    for stmt in src.tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and _is_false(stmt.value)
            and any(src.warp_name(t) == "config.enable_backward" for t in stmt.targets)
        ):
            yield stmt


def _kernel_decorator(kernel: KernelDef) -> ast.expr | None:
    for dec in kernel.node.decorator_list:
        if isinstance(dec, ast.Call) and any(kw.arg == "enable_backward" for kw in dec.keywords):
            return dec
    return None


_WF202_KERNELS = """
import warp as wp
{header}

@wp.kernel{options}
def integrate(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), q_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q_out[i] = q[i] + 0.01 * v[i]


@wp.kernel
def height_loss(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i][1])


n = 16
q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
v = wp.ones(n, dtype=wp.vec3, requires_grad=True)
q_next = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
"""
_WF202_TAPED = """tape = wp.Tape()
with tape:
    wp.launch(integrate, dim=n, inputs=[q, v], outputs=[q_next])
    wp.launch(height_loss, dim=n, inputs=[q_next], outputs=[loss])
tape.backward(loss)
"""


class BackwardDisabled(Rule):
    id = "WF202"
    name = "backward-disabled"
    severity = Severity.ERROR
    fix_safety = FixSafety.UNSAFE
    fix_description = "remove `enable_backward=False` for the taped kernel"
    doc = RuleDoc(
        what=(
            "Flags `enable_backward=False` — a kernel option `@wp.kernel(enable_backward=False)`, "
            '`wp.set_module_options({"enable_backward": False})` in the kernel\'s module, or a module-level '
            "`wp.config.enable_backward = False` before the kernel is defined — when that kernel is launched "
            "on a tape, reads arrays that need gradients, and the tape is differentiated."
        ),
        why=(
            "No adjoint code is compiled for the kernel, so backward skips it: every gradient that should "
            "flow through it is lost. `tape.backward()` logs a warning that is easy to miss, and "
            "`gradcheck_tape` silently skips such kernels."
        ),
        example="""
@wp.kernel(enable_backward=False)
def integrate(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), q_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q_out[i] = q[i] + 0.01 * v[i]

with tape:
    wp.launch(integrate, dim=n, inputs=[q, v], outputs=[q_next])
    ...
tape.backward(loss)
""",
        use_instead="""
@wp.kernel
def integrate(q: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), q_out: wp.array(dtype=wp.vec3)):
    ...
""",
        fix=(
            "Unsafe: enabling backward compiles adjoint code (slower builds, larger modules); when the option "
            "is module- or config-wide the removal also affects kernels that may not need it."
        ),
        versions="All supported Warp versions: the kernel option takes precedence over the module option.",
    )
    VALID = [
        Example(
            _WF202_KERNELS.format(header="", options="(enable_backward=False)")
            + """
wp.launch(integrate, dim=n, inputs=[q, v], outputs=[q_next])
print(q_next.numpy())
""",
            note="launched outside any tape (rendering, initialisation)",
        ),
        Example(
            _WF202_KERNELS.format(
                header='\nwp.set_module_options({"enable_backward": False})\n',
                options="(enable_backward=True)",
            ).replace("@wp.kernel\ndef height_loss", "@wp.kernel(enable_backward=True)\ndef height_loss")
            + _WF202_TAPED,
            note="the kernel option overrides the module option",
        ),
    ]
    INVALID = [
        Example(
            _WF202_KERNELS.format(header="", options="(enable_backward=False)  # expect: WF202")
            + _WF202_TAPED,
            expected_fix=_WF202_KERNELS.format(header="", options="  # expect: WF202") + _WF202_TAPED,
        ),
        Example(
            _WF202_KERNELS.format(
                header='\nwp.set_module_options({"enable_backward": False})  # expect: WF202\n', options=""
            )
            + _WF202_TAPED,
        ),
        Example(
            _WF202_KERNELS.format(header="\nwp.config.enable_backward = False  # expect: WF202\n", options="")
            + _WF202_TAPED,
        ),
    ]

    def check(self, project: Project) -> Iterator[Finding]:
        module_calls = {path: next(_module_option_calls(src), None) for path, src in project.files.items()}
        configs = [(src, stmt) for src in project.files.values() for stmt in _config_assignments(src)]
        disabled: dict[int, tuple[Span, str]] = {}  # id(kernel node) -> where backward is disabled
        for kernel in project.kernels:
            src = project.files.get(kernel.path)
            if kernel.kind == "kernel" and src is not None:
                place = _disabling_place(project, src, kernel, module_calls.get(kernel.path), configs)
                if place is not None:
                    disabled[id(kernel.node)] = place
        places: dict[Span, tuple[str, list[tuple[KernelDef, Event]]]] = {}
        for kernel, launch in _taped_launches(project, disabled):
            span, how = disabled[id(kernel.node)]
            places.setdefault(span, (how, []))[1].append((kernel, launch))
        for span, (how, hits) in places.items():
            kernels = ", ".join(f"`{k.name}` (launched on a tape at {line_ref(ev.span, span)})" for k, ev in hits)
            yield self.finding(
                span,
                f"{how} compiles no adjoint for {kernels}, which backward differentiates: backward skips "
                f"{'it' if len(hits) == 1 else 'them'} and every gradient through "
                f"{'it' if len(hits) == 1 else 'them'} is lost",
                related=tuple((ev.span, f"`{k.name}` launched on a tape here") for k, ev in hits),
            )


def _taped_launches(project: Project, kernels: dict[int, tuple[Span, str]]) -> Iterator[tuple[KernelDef, Event]]:
    """The first launch of each of ``kernels`` that a tape records, with inputs that need gradients,
    before a backward of that tape."""
    seen: set[int] = set()
    for trace in project.traces:
        events = trace.events
        last_backward = {e.tape: i for i, e in enumerate(events) if e.kind == "backward"}
        for idx, ev in enumerate(events):
            kernel = ev.kernel
            if ev.kind != "launch" or kernel is None or id(kernel.node) not in kernels or id(kernel.node) in seen:
                continue
            tape = tape_of(ev)
            if tape is None or last_backward.get(tape, -1) < idx:
                continue
            if any(b.root().requires_grad for b in true_reads(ev)):
                seen.add(id(kernel.node))
                yield kernel, ev


def _disabling_place(
    project: Project,
    src: SourceFile,
    kernel: KernelDef,
    module_call: ast.Call | None,
    configs: list[tuple[SourceFile, ast.Assign]],
) -> tuple[Span, str] | None:
    """Where backward code generation is switched off for ``kernel``: its own option (which takes
    precedence), its module's options, or the global config before its module was created."""
    if "enable_backward" in kernel.options:
        if kernel.options["enable_backward"] is False:
            dec = _kernel_decorator(kernel)
            return (src.span(dec) if dec is not None else kernel.span), "kernel option `enable_backward=False`"
        return None
    if module_call is not None:
        return src.span(module_call), "module option `enable_backward: False`"
    for other, stmt in configs:
        if _config_reaches(project, other, stmt, kernel):
            return other.span(stmt), "config `wp.config.enable_backward = False`"
    return None


def _config_reaches(project: Project, src: SourceFile, stmt: ast.Assign, kernel: KernelDef) -> bool:
    """Whether the module of ``kernel`` is created after ``stmt`` ran: it is defined later in the same
    file, or its file is imported (as a project module) below the assignment."""
    if kernel.path == src.path:
        return kernel.node.lineno > stmt.lineno
    target = project.files.get(kernel.path)
    if target is None or not target.module_name:
        return False
    leaf = target.module_name.rpartition(".")[2]
    for node in src.tree.body:
        if node.lineno <= stmt.lineno:
            continue
        if isinstance(node, ast.Import) and any(a.name.rpartition(".")[2] == leaf for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (
            (node.module or "").rpartition(".")[2] == leaf or any(a.name == leaf for a in node.names)
        ):
            return True
    return False


# ---------------------------------------------------------------------------------------- WF203


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

    def check(self, project: Project) -> Iterator[Finding]:
        names_by_file = {path: _assignments(src) for path, src in project.files.items()}
        # the objective is averaged where the seed is made: a `mean` in another file says nothing about it
        averaged_by_file = {path: _averaged_names(src) for path, src in project.files.items()}
        for trace in project.traces:
            names = names_by_file.get(trace.path, {})
            events = trace.events
            for idx, ev in enumerate(events):
                if (
                    ev.kind == "grad_zero"
                    and ev.detail.get("method") == "fill_"
                    and isinstance(ev.node, ast.Call)
                ):
                    owner = next((b.grad_of for b in ev.writes if b.grad_of is not None), None)
                    value = _seed_value(ev.node.args[0] if ev.node.args else None, names)
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
                        averaged = averaged_by_file.get(ev.span.path, set())
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
                            averaged = averaged_by_file.get(ev.span.path, set())
                            yield from self._judge(
                                events, ev, owner, ast.unparse(key), _seed_value(val, names), ev.tape, averaged
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
