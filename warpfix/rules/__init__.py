"""Rule registry: every module ``wf*.py`` in this package contributes its Rule subclasses."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from warpfix.rules.base import Example, Rule, RuleDoc

__all__ = ["Example", "Rule", "RuleDoc", "all_rules", "rule_by_id"]


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """All rule classes, sorted by ID."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("wf"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and hasattr(obj, "id"):
                if obj.__module__ != module.__name__:
                    continue
                if obj.id in found and found[obj.id] is not obj:
                    raise RuntimeError(f"duplicate rule id {obj.id}")
                found[obj.id] = obj
    return tuple(found[k] for k in sorted(found))


def rule_by_id(rule_id: str) -> type[Rule] | None:
    for r in all_rules():
        if r.id == rule_id.upper() or r.name == rule_id:
            return r
    return None
