"""The WF1xx rules that report the overwrite hazards they own (:mod:`warpfix.model.hazards`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from warpfix.finding import Finding
from warpfix.model.hazards import Hazard, HazardStream
from warpfix.rules.base import Rule

if TYPE_CHECKING:
    from warpfix.model import Project
    from warpfix.model.facts import Trace


class HazardRule(Rule):
    """Reports each hazard it owns (:meth:`report`), trace by trace, the untaped ones last."""

    def begin(self, project: Project) -> None:
        self._hazards = HazardStream(self.id)

    def check_trace(self, project: Project, trace: Trace) -> Iterator[Finding]:
        for hz in self._hazards.of_trace(project, trace):
            yield from self.report(hz)

    def check_project(self, project: Project) -> Iterator[Finding]:
        for hz in self._hazards.rest():
            yield from self.report(hz)

    def report(self, hz: Hazard) -> Iterator[Finding]:
        raise NotImplementedError
