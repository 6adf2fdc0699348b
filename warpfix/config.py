"""``[tool.warpfix]`` in the nearest ``pyproject.toml``."""

from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass, field

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass
class Config:
    select: list[str] = field(default_factory=list)  # rule IDs or prefixes ("WF1"); empty = all
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)  # glob -> IDs
    exclude: list[str] = field(default_factory=list)  # globs of paths to skip
    entry: list[str] = field(default_factory=list)  # command for FD checks (`apply --check`, the hook)
    device: str | None = None
    path: str | None = None  # the pyproject.toml it came from

    def ignored_for(self, path: str) -> set[str]:
        out: set[str] = set()
        for pattern, ids in self.per_file_ignores.items():
            if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(os.path.basename(path), pattern):
                out.update(ids)
        return out


class ConfigError(Exception):
    pass


def find_pyproject(start: str) -> str | None:
    cur = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or ".")
    while True:
        cand = os.path.join(cur, "pyproject.toml")
        if os.path.isfile(cand):
            return cand
        parent = os.path.dirname(cur)
        if parent == cur:
            return None
        cur = parent


def load_config(start: str = ".") -> Config:
    path = find_pyproject(start)
    if path is None:
        return Config()
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from exc
    section = data.get("tool", {}).get("warpfix", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.warpfix] must be a table")
    entry = section.get("entry", [])
    if isinstance(entry, str):
        entry = entry.split()
    return Config(
        select=[s.upper() for s in section.get("select", [])],
        ignore=[s.upper() for s in section.get("ignore", [])],
        per_file_ignores={k: [i.upper() for i in v] for k, v in section.get("per-file-ignores", {}).items()},
        exclude=list(section.get("exclude", [])),
        entry=list(entry),
        device=section.get("device"),
        path=path,
    )


def selected(rule_id: str, select: list[str], ignore: list[str]) -> bool:
    """ruff semantics: IDs or prefixes; the more specific of select and ignore wins, ignore on a tie."""
    if select:
        matches = [len(s) for s in select if rule_id.startswith(s)]
        if not matches:
            return False
        sel = max(matches)
    else:
        sel = 0
    ign = max((len(s) for s in ignore if rule_id.startswith(s)), default=None)
    return ign is None or sel > ign
