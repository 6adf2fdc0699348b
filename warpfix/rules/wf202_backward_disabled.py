"""WF202 backward-disabled: `enable_backward=False` (kernel option, `wp.set_module_options`, or
`wp.config`) on a kernel launched on a tape."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from warpfix.finding import Finding, FixSafety, Severity, Span
from warpfix.model import Project, SourceFile
from warpfix.model.facts import Event, KernelDef, Trace
from warpfix.model.import_order import ImportOrder
from warpfix.model.tapeflow import line_ref, tape_of, true_reads
from warpfix.rules.base import Example, Rule, RuleDoc

_KernelKey = tuple[str, tuple[int, int]]  # (path, line and column of the def)


def _is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


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

    def begin(self, project: Project) -> None:
        # from the files' summaries: no syntax tree is read (a large project's trees stay released)
        self._module_calls = {path: src.summary.module_options_off for path, src in project.files.items()}
        self._configs = [(src, span) for src in project.files.values() for span in src.summary.config_off]
        self._order = ImportOrder(project.files) if self._configs else None
        self._project = project
        # whether any kernel may be compiled without backward; which ones is decided at their first
        # taped launch (memoised: kernel -> where backward is disabled, or None)
        self._any = bool(self._configs) or any(self._module_calls.values()) or any(
            k.options.get("enable_backward") is False for k in project.kernels)
        self._disabled: dict[_KernelKey, tuple[Span, str] | None] = {}
        self._seen: set[_KernelKey] = set()  # the disabled kernels whose taped launch was found
        self._places: dict[Span, tuple[str, list[tuple[KernelDef, Event]]]] = {}

    def _place(self, kernel: KernelDef) -> tuple[Span, str] | None:
        """Where backward code generation is switched off for ``kernel``, if it is."""
        key = (kernel.path, kernel.key)
        if key not in self._disabled:
            src = self._project.files.get(kernel.path)
            self._disabled[key] = None if kernel.kind != "kernel" or src is None else _disabling_place(
                self._order, src, kernel, self._module_calls.get(kernel.path), self._configs)
        return self._disabled[key]

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        if self._any:
            for kernel, launch, (span, how) in _taped_launches(trace, self._place, self._seen):
                self._places.setdefault(span, (how, []))[1].append((kernel, launch))
        return iter(())

    def check_project(self, project: Project) -> Iterator[Finding]:
        for span, (how, hits) in self._places.items():
            kernels = ", ".join(f"`{k.name}` (launched on a tape at {line_ref(ev.span, span)})" for k, ev in hits)
            yield self.finding(
                span,
                f"{how} compiles no adjoint for {kernels}, which backward differentiates: backward skips "
                f"{'it' if len(hits) == 1 else 'them'} and every gradient through "
                f"{'it' if len(hits) == 1 else 'them'} is lost",
                related=tuple((ev.span, f"`{k.name}` launched on a tape here") for k, ev in hits),
            )


def _taped_launches(trace: Trace, place: Callable[[KernelDef], tuple[Span, str] | None], seen: set[_KernelKey]
                    ) -> Iterator[tuple[KernelDef, Event, tuple[Span, str]]]:
    """The first launch of each kernel compiled without backward (``place`` says where that is
    switched off) not ``seen`` in an earlier trace that a tape records, with inputs that need
    gradients, before a backward of that tape (added to ``seen``)."""
    events = trace.events
    last_backward = {e.tape: i for i, e in enumerate(events) if e.kind == "backward"}
    for idx, ev in enumerate(events):
        kernel = ev.kernel
        if ev.kind != "launch" or kernel is None:
            continue
        key = (kernel.path, kernel.key)
        if key in seen:
            continue
        if "library" in ev.detail:
            # a library's own launch of a kernel it compiles without backward is its design, not the
            # caller's bug: warp.fem's array_axpy takes the tape off for it and records its adjoint
            # with tape.record_func, which a summary does not follow
            continue
        tape = tape_of(ev)
        if tape is None or last_backward.get(tape, -1) < idx:
            continue
        if any(b.root().requires_grad for b in true_reads(ev)):
            where = place(kernel)
            if where is None:
                continue
            seen.add(key)
            yield kernel, ev, where


def _disabling_place(
    order: ImportOrder | None,
    src: SourceFile,
    kernel: KernelDef,
    module_call: Span | None,
    configs: list[tuple[SourceFile, Span]],
) -> tuple[Span, str] | None:
    """Where backward code generation is switched off for ``kernel``: its own option (which takes
    precedence), its module's options, or the global config before its module was created."""
    if "enable_backward" in kernel.options:
        if kernel.options["enable_backward"] is False:
            return kernel.backward_option or kernel.span, "kernel option `enable_backward=False`"
        return None
    if module_call is not None:
        return module_call, "module option `enable_backward: False`"
    for other, span in configs:
        if order is not None and order.runs_before(other.path, span.line, kernel.path, kernel.key[0]):
            return span, "config `wp.config.enable_backward = False`"
    return None
