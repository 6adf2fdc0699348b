"""``[tool.warpfix]`` configuration: the nearest ``pyproject.toml`` of each file.

Paths in a configuration (``exclude``, ``per-file-ignores``) are glob patterns matched against
the file's path relative to the folder of the ``pyproject.toml`` they come from (POSIX
separators), whatever form the path was given in on the command line. A pattern also matches
when it matches any parent folder of that relative path (``third_party`` and
``third_party/*`` both exclude ``third_party/a/b.py``) or the file's base name (``test_*.py``).

:class:`ProjectConfig` resolves the configuration of every file of one run, with the command
line's overrides (``--extend-select``, ``--fixable``, ...) applied to each.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
    extend_select: list[str] = field(default_factory=list)
    fixable: list[str] = field(default_factory=list)  # empty = every rule with a fix
    unfixable: list[str] = field(default_factory=list)

    @property
    def root(self) -> str:
        """The folder paths are relative to: the configuration file's, else the working directory."""
        return os.path.dirname(os.path.abspath(self.path)) if self.path else os.getcwd()

    def relative(self, path: str) -> str:
        """``path`` relative to :attr:`root` with ``/`` separators (absolute when outside it)."""
        full = os.path.abspath(path)
        rel = os.path.relpath(full, self.root)
        if rel == ".." or rel.startswith(".." + os.sep):
            rel = full
        return rel.replace(os.sep, "/")

    def _matches(self, path: str, patterns: Sequence[str]) -> bool:
        rel = self.relative(path)
        parts = rel.split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))] + [parts[-1]]
        return any(fnmatch.fnmatchcase(c, p.rstrip("/")) for p in patterns for c in candidates)

    def excludes(self, path: str) -> bool:
        return bool(self.exclude) and self._matches(path, self.exclude)

    def ignored_for(self, path: str) -> set[str]:
        out: set[str] = set()
        for pattern, ids in self.per_file_ignores.items():
            if self._matches(path, [pattern]):
                out.update(ids)
        return out

    def enables(self, rule_id: str, path: str | None, select: Sequence[str] = (), ignore: Sequence[str] = ()) -> bool:
        """Whether ``rule_id`` runs (``path`` None) or is reported in ``path``; ``select``/``ignore``
        come from the command line (``--select`` replaces the configured selection)."""
        sel = [*(select or self.select), *self.extend_select] if (select or self.select) else []
        if not selected(rule_id, [s.upper() for s in sel], [s.upper() for s in (*ignore, *self.ignore)]):
            return False
        return path is None or not any(rule_id.startswith(i) for i in self.ignored_for(path))

    def fixes(self, rule_id: str) -> bool:
        """Whether ``warpfix apply`` may fix findings of ``rule_id`` (``fixable``/``unfixable``)."""
        if self.fixable and not any(rule_id.startswith(p) for p in self.fixable):
            return False
        return not any(rule_id.startswith(p) for p in self.unfixable)

    def for_path(self, path: str) -> Config:
        return self

    def settings(self) -> dict[str, Any]:
        """The resolved settings, for ``--show-settings``."""
        return {**dataclasses.asdict(self), "root": self.root}


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


def _ids(section: dict, key: str, path: str) -> list[str]:
    value = section.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: `{key}` must be a list of rule IDs")
    return [v.upper() for v in value]


def read_config_file(path: str) -> Config:
    """A ``pyproject.toml`` (its ``[tool.warpfix]``) or a TOML file holding the keys at top level."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from exc
    if os.path.basename(path) == "pyproject.toml" or "tool" in data:
        section = data.get("tool", {}).get("warpfix", {})
    else:
        section = data
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.warpfix] must be a table")
    entry = section.get("entry", [])
    if isinstance(entry, str):
        entry = entry.split()
    per_file = section.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{path}: `per-file-ignores` must be a table of glob = [IDs]")
    return Config(
        select=_ids(section, "select", path),
        ignore=_ids(section, "ignore", path),
        per_file_ignores={k: _ids(per_file, k, path) for k in per_file},
        exclude=[str(p) for p in section.get("exclude", [])],
        entry=list(entry),
        device=section.get("device"),
        path=os.path.abspath(path),
        extend_select=_ids(section, "extend-select", path),
        fixable=_ids(section, "fixable", path),
        unfixable=_ids(section, "unfixable", path),
    )


def load_config(start: str = ".") -> Config:
    path = find_pyproject(start)
    return Config() if path is None else read_config_file(path)


@dataclass(frozen=True)
class Overrides:
    """Command-line settings added to every configuration of a run."""

    extend_select: tuple[str, ...] = ()
    extend_ignore: tuple[str, ...] = ()
    fixable: tuple[str, ...] | None = None  # replaces the configured list when given
    unfixable: tuple[str, ...] = ()

    def apply(self, config: Config) -> Config:
        return dataclasses.replace(
            config,
            extend_select=[*config.extend_select, *self.extend_select],
            ignore=[*config.ignore, *self.extend_ignore],
            fixable=list(self.fixable) if self.fixable is not None else config.fixable,
            unfixable=[*config.unfixable, *self.unfixable],
        )


class ProjectConfig:
    """The configuration of each file of one run: the nearest ``pyproject.toml`` (``--config``:
    one file for all; ``--isolated``: none), with the command line's :class:`Overrides`.

    It answers the same questions as :class:`Config`, per path; with no path (which rules run at
    all) a rule runs when any configuration seen so far enables it.
    """

    def __init__(self, *, config_file: str | None = None, isolated: bool = False,
                 overrides: Overrides = Overrides()) -> None:
        self.overrides = overrides
        self._fixed: Config | None = None
        if isolated:
            self._fixed = overrides.apply(Config())
        elif config_file is not None:
            self._fixed = overrides.apply(read_config_file(config_file))
        self._by_file: dict[str, Config] = {}  # pyproject path ("" = none) -> config
        self._by_dir: dict[str, str] = {}

    def for_path(self, path: str) -> Config:
        """The configuration of ``path`` (a file or folder); raises :class:`ConfigError`."""
        if self._fixed is not None:
            return self._fixed
        folder = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path) or ".")
        key = self._by_dir.get(folder)
        if key is None:
            key = find_pyproject(folder) or ""
            self._by_dir[folder] = key
        if key not in self._by_file:
            self._by_file[key] = self.overrides.apply(read_config_file(key) if key else Config())
        return self._by_file[key]

    def configs(self) -> list[Config]:
        if self._fixed is not None:
            return [self._fixed]
        return [self._by_file[k] for k in sorted(self._by_file)] or [self.overrides.apply(Config())]

    # -- the Config interface, per path ----------------------------------------------------
    def excludes(self, path: str) -> bool:
        return self.for_path(path).excludes(path)

    def enables(self, rule_id: str, path: str | None, select: Sequence[str] = (), ignore: Sequence[str] = ()) -> bool:
        if path is None:
            return any(c.enables(rule_id, None, select, ignore) for c in self.configs())
        return self.for_path(path).enables(rule_id, path, select, ignore)

    def __repr__(self) -> str:  # part of the result cache key
        return f"ProjectConfig({self.configs()!r})"


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
