"""The shared base of WF106 kernel-rmw and WF107 struct-held-overwrite: a taped kernel reading and
overwriting its own argument, reported at the kernel's store (WF106 also at a launch passing one array
as an input the kernel reads and as an output it overwrites: :mod:`warpfix.rules._launch_alias`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding, Span
from warpfix.model.facts import KernelDef, Trace
from warpfix.model.hazards import Hazard, HazardStream, read_related
from warpfix.model.kernel_flow import integer_array_text, integer_rmw_reaches_gradient
from warpfix.model.reach import tape_reach
from warpfix.model.value_reads import replay_sensitive_params, rmw_params
from warpfix.rules._launch_alias import aliased_findings
from warpfix.rules.base import Rule

if TYPE_CHECKING:
    from warpfix.model import Project


class KernelRmwRule(Rule):
    """Shared detector for WF106/WF107: a kernel that reads then overwrites its own argument."""

    struct_fields: bool = False

    def begin(self, project: Project) -> None:
        self._hazards = HazardStream(self.id)
        self._taped_hazards: list[Hazard] = []
        # the recorded launches of each kernel, by (path, name): their places, in trace order
        self._launches: dict[tuple[str, str], dict[Span, None]] = {}

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        self._taped_hazards.extend(self._hazards.of_trace(project, trace))
        for ev in trace.events:
            if ev.kind == "launch" and ev.recorded and ev.kernel is not None:
                self._launches.setdefault((ev.kernel.path, ev.kernel.name), {}).setdefault(ev.span)
        return iter(())

    def owned_hazards(self) -> list[Hazard]:
        """The rule's hazards over every trace, the taped ones first."""
        return [*self._taped_hazards, *self._hazards.rest()]

    def check_project(self, project: Project) -> Iterator[Finding]:
        # launches of read-modify-write kernels that overwrite what an earlier op's adjoint needs
        overwriting: dict[tuple[str, str, str], list[Hazard]] = {}
        for hz in self.owned_hazards():
            kd = hz.write.event.kernel
            if kd is not None and hz.write.param is not None:
                overwriting.setdefault((kd.path, kd.name, hz.write.param), []).append(hz)
        reach = tape_reach(project)
        for kd in project.kernels:
            launches = list(self._launches.get((kd.path, kd.name), ()))
            if not launches:
                continue  # no tape records it (its body is not read)
            replayed = not reach.backward_disabled(kd)  # no adjoint replays it (WF202 reports a taped one)
            sensitive = replay_sensitive_params(kd)  # the read-modify-write reads what the replay sees
            for param, spans in rmw_params(kd).items():
                if ("." in param) != self.struct_fields:
                    continue
                hazards = overwriting.get((kd.path, kd.name, param), [])
                if not hazards and not (replayed and param in sensitive):
                    continue  # a linear in-place update nobody needs the old value of, or no replay
                if (
                    not hazards
                    and integer_array_text(kd.params[param].annotation)
                    and not integer_rmw_reaches_gradient(kd, param)
                ):
                    continue  # an integer counter whose values reach no gradient
                yield self._report(kd, param, spans[0], launches, hazards)
        if not self.struct_fields:
            yield from aliased_findings(self, project, self.owned_hazards())

    def _report(
        self, kd: KernelDef, param: str, span: Span, launches: list[Span], hazards: list[Hazard]
    ) -> Finding:
        if self.struct_fields:
            what = f"kernel `{kd.name}` reads struct field `{param}` and then overwrites the same element"
        else:
            what = f"kernel `{kd.name}` reads `{param}` and then overwrites the same element"
        lines = ", ".join(str(at.line) for at in launches)
        if hazards:
            why = f"; it also overwrites what {hazards[0].read.describe()} read"
        else:
            why = ""
        related = tuple((at, f"`{kd.name}` launched here on a tape") for at in launches)
        if hazards:
            related += read_related(hazards[0])
        return self.finding(
            span,
            f"{what}, and is launched on a tape (line {lines}){why}; the adjoint replays against the overwritten "
            "values. Write to a separate output argument instead",
            data={"kernel": kd.name, "param": param},
            related=related,
        )
