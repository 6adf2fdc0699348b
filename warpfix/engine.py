"""Run the rules over a project: discover and read files, build the model once, collect findings."""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache

from warpfix import __version__
from warpfix.config import Config, selected
from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.model import Project, SourceFile, build_project, module_name_for
from warpfix.rules import all_rules
from warpfix.rules.base import Rule
from warpfix.suppress import is_suppressed, suppressions

SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist", "site-packages", "venv", "env", ".venv"}
CACHE_DIR = ".warpfix_cache"
PARALLEL_MIN_FILES = 32  # smaller projects check faster than a process pool starts


@dataclass(frozen=True)
class InputError:
    path: str
    message: str


@dataclass
class CheckResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    files_checked: int = 0
    sources: dict[str, str] = field(default_factory=dict)  # checked files that may hold findings
    cached: bool = False


class UsageError(Exception):
    """A problem with the command line itself (exit code 2 before any work)."""


@cache
def installed_warp_version() -> tuple[int, ...]:
    """The installed warp-lang version, read from package metadata (importing warp is slow)."""
    from importlib import metadata

    try:
        text = metadata.version("warp-lang")
    except metadata.PackageNotFoundError:
        return (1, 19, 0)
    return parse_version(text)


def parse_version(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for p in text.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


# ---------------------------------------------------------------------------------- discovery
def discover(paths: Sequence[str], exclude: Sequence[str] = ()) -> tuple[list[str], list[InputError]]:
    """Python files under ``paths`` (files as given; folders walked, skipping virtualenvs, build
    output and hidden folders below them). Missing paths are errors."""
    import fnmatch

    files: list[str] = []
    errors: list[InputError] = []
    seen: set[str] = set()

    def add(p: str) -> None:
        key = os.path.realpath(p)
        if key not in seen and not any(fnmatch.fnmatch(p, pat) for pat in exclude):
            seen.add(key)
            files.append(p)

    for given in paths:
        if os.path.isfile(given):
            add(given)
        elif os.path.isdir(given):
            for root, dirs, names in os.walk(given):
                dirs[:] = sorted(
                    d for d in dirs
                    if not d.startswith(".") and d not in SKIP_DIRS and not os.path.isfile(os.path.join(root, d, "pyvenv.cfg"))
                )
                for n in sorted(names):
                    if n.endswith(".py"):
                        add(os.path.join(root, n) if root != "." else n)
        else:
            errors.append(InputError(given, "no such file or directory"))
    return files, errors


def read_source(path: str) -> tuple[str | None, str | None]:
    """(text, None) or (None, one-line error)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if b"\x00" in data:
        return None, "binary file (contains NUL bytes), skipped"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 (byte {exc.start}), skipped"
    return text, None


def _might_matter(text: str) -> bool:
    """Cheap text test: a file that never mentions warp cannot hold a Warp gradient bug."""
    return "warp" in text


def parse_file(path: str, text: str) -> tuple[SourceFile | None, str | None]:
    try:
        return SourceFile.parse(path, text, module_name_for(path)), None
    except SyntaxError as exc:
        return None, f"syntax error at line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return None, f"cannot parse: {exc}"


class ParseCache:
    """The last parse of each path, for a process that checks nearly the same files again and
    again (the language server re-checks an open document's folder on every change). A parsed file
    is only read by the model and the rules, never changed, so it can serve the next check of the
    same text. Holds at most ``size`` paths (least recently used go first)."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._entries: OrderedDict[str, tuple[str, tuple[SourceFile | None, str | None]]] = OrderedDict()

    def parse(self, path: str, text: str) -> tuple[SourceFile | None, str | None]:
        hit = self._entries.get(path)
        if hit is not None and hit[0] == text:
            self._entries.move_to_end(path)
            return hit[1]
        result = parse_file(path, text)
        self._entries[path] = (text, result)
        self._entries.move_to_end(path)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return result


ParseFn = Callable[[str, str], tuple[SourceFile | None, str | None]]


def _follow_imports(
    files: dict[str, SourceFile], errors: list[InputError], parse: ParseFn = parse_file
) -> None:
    """Add the project modules that the given files import from the same tree (next to the importer)."""
    queue = list(files.values())
    known = {os.path.realpath(p) for p in files}
    while queue:
        src = queue.pop()
        base_dir = os.path.dirname(src.path)
        for mod, level, name, _ in src.project_imports:
            if level > 1:
                continue
            rels = [mod.replace(".", os.sep)] if mod else []
            if name and name != "*":
                rels.append(os.path.join(mod.replace(".", os.sep), name) if mod else name)
            for rel in rels:
                for cand in (os.path.join(base_dir, rel + ".py"), os.path.join(base_dir, rel, "__init__.py")):
                    real = os.path.realpath(cand)
                    if real in known or not os.path.isfile(cand):
                        continue
                    known.add(real)
                    text, err = read_source(cand)
                    if text is None or not _might_matter(text):
                        continue
                    parsed, err = parse(os.path.normpath(cand), text)
                    if parsed is None:
                        errors.append(InputError(os.path.normpath(cand), err or "cannot parse"))
                        continue
                    files[parsed.path] = parsed
                    queue.append(parsed)


# ---------------------------------------------------------------------------------- running rules
def run_rules(
    project: Project,
    *,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    config: Config | None = None,
    jobs: int = 1,
) -> list[Finding]:
    """The findings of every selected rule, deduplicated, suppressions applied, sorted. With
    ``jobs > 1`` on a large project the rules run in forked workers (the output is the same)."""
    config = config or Config()
    sel = [s.upper() for s in (select or config.select)]
    ign = [s.upper() for s in (*ignore, *config.ignore)]
    rules = []
    for rule_cls in all_rules():
        if not selected(rule_cls.id, sel, ign):
            continue
        rule = rule_cls(warp_version=project.warp_version)
        if rule.applies_to_warp(project.warp_version):
            rules.append(rule)
    with _frozen_between_rules():
        if jobs > 1 and len(project.files) >= PARALLEL_MIN_FILES and _can_fork():
            per_rule = _check_forked(project, rules, jobs)
        else:
            per_rule = []
            for rule in rules:
                per_rule.append(_check_one(project, rule))
                gc.freeze()  # what the rule built to stay (the traces) is never rescanned
    findings: dict[tuple[str, Span], Finding] = {}
    for found in per_rule:
        for f in found:
            findings.setdefault((f.rule, f.span), f)
    sup_cache: dict[str, dict] = {}
    out = []
    for f in findings.values():
        src = project.files.get(f.path)
        if src is not None:
            table = sup_cache.setdefault(f.path, suppressions(src.text))
            if is_suppressed(table, f.line, f.rule):
                continue
        if f.rule in config.ignored_for(f.path):
            continue
        out.append(f)
    out.sort(key=Finding.sort_key)
    return out


def _check_one(project: Project, rule: Rule) -> list[Finding]:
    """One rule's findings; pathological nesting stops the rule where it is, never the check."""
    found: list[Finding] = []
    try:
        for f in rule.check(project):
            found.append(f)
    except RecursionError:
        pass
    return found


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


# The project the forked rule workers read: set before the pool forks, so each worker inherits it
# (with its traces) instead of receiving a pickled copy.
_FORKED: tuple[Project, list[Rule]] | None = None


def _check_forked(project: Project, rules: list[Rule], jobs: int) -> list[list[Finding]]:
    """Each rule's findings, the rules spread over ``jobs`` forked processes (results in rule order)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _FORKED
    project.traces  # noqa: B018 - interpret once, before forking: every worker shares the result
    _FORKED = (project, rules)
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_check_forked_rule, range(len(rules))))
    finally:
        _FORKED = None


def _check_forked_rule(index: int) -> list[Finding]:
    assert _FORKED is not None
    project, rules = _FORKED
    return _check_one(project, rules[index])


@contextmanager
def _frozen_between_rules() -> Iterator[None]:
    """Keep the collector for the garbage rules make, but not rescanning the model: the objects
    alive after each rule move to the permanent generation (``gc.freeze``), and back at the end."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a check builds its model. A check allocates
    millions of AST nodes and model objects that all stay alive until it ends; each full collection
    would rescan every one of them (a third of the parse time on large trees)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def check_sources(
    sources: dict[str, str],
    *,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    config: Config | None = None,
    warp_version: tuple[int, ...] | None = None,
    follow_imports: bool = False,
    parse_cache: ParseCache | None = None,
) -> CheckResult:
    """Check in-memory sources (tests, the language server). Paths are used as given."""
    files: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    parse = parse_cache.parse if parse_cache is not None else parse_file
    with _collector_paused():
        for path, text in sources.items():
            if not _might_matter(text):
                continue
            parsed, err = parse(path, text)
            if parsed is None:
                errors.append(InputError(path, err or "cannot parse"))
            else:
                files[path] = parsed
    with _collector_paused():
        if follow_imports:
            _follow_imports(files, errors, parse)
        project = build_project(files, warp_version or installed_warp_version())
    findings = run_rules(project, select=select, ignore=ignore, config=config)
    return CheckResult(findings, errors, len(sources), {p: s.text for p, s in files.items()})


def check_paths(
    paths: Sequence[str],
    *,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    config: Config | None = None,
    jobs: int = 1,
    use_cache: bool = True,
    warp_version: tuple[int, ...] | None = None,
) -> CheckResult:
    """Check files and folders. Unreadable or unparsable files become errors; the rest is checked.
    ``jobs``: processes for the rules (0: one per core)."""
    config = config or Config()
    version = warp_version or installed_warp_version()
    file_list, errors = discover(paths, config.exclude)
    texts: dict[str, str] = {}
    for p in file_list:
        text, err = read_source(p)
        if text is None:
            errors.append(InputError(p, err or "cannot read"))
        else:
            texts[p] = text
    relevant = {p: t for p, t in texts.items() if _might_matter(t)}
    key = _cache_key(relevant, select, ignore, config, version) if use_cache else None
    if key is not None:
        hit = _cache_load(key)
        if hit is not None:
            findings, parse_errors = hit
            return CheckResult(findings, errors + parse_errors, len(texts), relevant, cached=True)
    with _collector_paused():
        files, parse_errors = _parse_all(relevant)
        _follow_imports(files, parse_errors)
        project = build_project(files, version)
    findings = run_rules(project, select=select, ignore=ignore, config=config,
                         jobs=jobs if jobs > 0 else default_jobs())
    if key is not None:
        _cache_store(key, findings, parse_errors)
    sources = {p: s.text for p, s in files.items()}
    return CheckResult(findings, errors + parse_errors, len(texts), sources)


def _parse_all(texts: dict[str, str]) -> tuple[dict[str, SourceFile], list[InputError]]:
    """Parse in this process: sending syntax trees back from worker processes costs more than
    parsing them (measured: twice the CPU and a longer wall time on warp's sources)."""
    out: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    for path, text in sorted(texts.items()):
        parsed, err = parse_file(path, text)
        if parsed is None:
            errors.append(InputError(path, err or "cannot parse"))
        else:
            out[path] = parsed
    return out, errors


# ---------------------------------------------------------------------------------- cache
def _cache_key(texts: dict[str, str], select: Iterable[str], ignore: Iterable[str], config: Config,
               version: tuple[int, ...]) -> str:
    h = hashlib.sha256()
    h.update(f"{__version__}|{version}|{sorted(select)}|{sorted(ignore)}|{config!r}".encode())
    h.update(_rules_fingerprint().encode())
    for p in sorted(texts):
        h.update(p.encode() + b"\0" + hashlib.sha256(texts[p].encode()).digest())
    return h.hexdigest()


@cache
def _rules_fingerprint() -> str:
    """Changes whenever warpfix's own code changes (editable installs, development)."""
    root = os.path.dirname(__file__)
    h = hashlib.sha256()
    for dirpath, _, names in sorted(os.walk(root)):
        for n in sorted(names):
            if n.endswith(".py"):
                st = os.stat(os.path.join(dirpath, n))
                h.update(f"{n}:{st.st_mtime_ns}:{st.st_size}".encode())
    return h.hexdigest()


def _cache_path(key: str) -> str:
    return os.path.join(CACHE_DIR, key[:2], key + ".json")


def _cache_load(key: str) -> tuple[list[Finding], list[InputError]] | None:
    try:
        with open(_cache_path(key), encoding="utf-8") as fh:
            data = json.load(fh)
        findings = [_finding_from_json(d) for d in data["findings"]]
        errors = [InputError(e["path"], e["message"]) for e in data["errors"]]
        return findings, errors
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cache_store(key: str, findings: list[Finding], errors: list[InputError]) -> None:
    path = _cache_path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        gitignore = os.path.join(CACHE_DIR, ".gitignore")
        if not os.path.exists(gitignore):
            with open(gitignore, "w", encoding="utf-8") as fh:
                fh.write("*\n")
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"findings": [f.to_json() for f in findings],
                       "errors": [{"path": e.path, "message": e.message} for e in errors]}, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def _finding_from_json(d: dict) -> Finding:
    related = tuple(
        (Span(r["path"], r["line"], r["column"], r["line"], r["column"]), r["message"]) for r in d.get("related", [])
    )
    return Finding(
        rule=d["rule"],
        name=d["name"],
        severity=Severity(d["severity"]),
        span=Span(d["path"], d["line"], d["column"], d["end_line"], d["end_column"]),
        message=d["message"],
        fix=Fix(FixSafety(d["fix"]["safety"]), d["fix"]["description"]),
        data=d.get("data", {}),
        related=related,
    )
