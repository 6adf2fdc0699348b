"""Run the rules over a project: discover and read files, build the model once, collect findings."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

from warpfix import __version__
from warpfix.config import Config, selected
from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.model import Project, SourceFile, build_project, module_name_for
from warpfix.model.taped import mark_taped
from warpfix.rules import all_rules
from warpfix.suppress import is_suppressed, suppressions

SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist", "site-packages", "venv", "env", ".venv"}
CACHE_DIR = ".warpfix_cache"


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


def _follow_imports(files: dict[str, SourceFile], errors: list[InputError]) -> None:
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
                    parsed, err = parse_file(os.path.normpath(cand), text)
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
) -> list[Finding]:
    config = config or Config()
    sel = [s.upper() for s in (select or config.select)]
    ign = [s.upper() for s in (*ignore, *config.ignore)]
    findings: dict[tuple[str, Span], Finding] = {}
    for rule_cls in all_rules():
        if not selected(rule_cls.id, sel, ign):
            continue
        rule = rule_cls(warp_version=project.warp_version)
        if not rule.applies_to_warp(project.warp_version):
            continue
        try:
            for f in rule.check(project):
                findings.setdefault((f.rule, f.span), f)
        except RecursionError:  # pathological nesting: skip the rule for this project
            continue
    sup_cache: dict[str, dict] = {}
    out = []
    for f in mark_taped(project, findings.values()):
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


def check_sources(
    sources: dict[str, str],
    *,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    config: Config | None = None,
    warp_version: tuple[int, ...] | None = None,
    follow_imports: bool = False,
) -> CheckResult:
    """Check in-memory sources (tests, the language server). Paths are used as given."""
    files: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    for path, text in sources.items():
        if not _might_matter(text):
            continue
        parsed, err = parse_file(path, text)
        if parsed is None:
            errors.append(InputError(path, err or "cannot parse"))
        else:
            files[path] = parsed
    if follow_imports:
        _follow_imports(files, errors)
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
    """Check files and folders. Unreadable or unparsable files become errors; the rest is checked."""
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
    parsed, parse_errors = _parse_all(relevant, jobs)
    files = dict(parsed)
    _follow_imports(files, parse_errors)
    project = build_project(files, version)
    findings = run_rules(project, select=select, ignore=ignore, config=config)
    if key is not None:
        _cache_store(key, findings, parse_errors)
    sources = {p: s.text for p, s in files.items()}
    return CheckResult(findings, errors + parse_errors, len(texts), sources)


def _parse_all(texts: dict[str, str], jobs: int) -> tuple[dict[str, SourceFile], list[InputError]]:
    out: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    items = sorted(texts.items())
    if jobs > 1 and len(items) > 64:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(_parse_item, items, chunksize=16))
    else:
        results = [_parse_item(item) for item in items]
    for (path, _), (parsed, err) in zip(items, results, strict=True):
        if parsed is None:
            errors.append(InputError(path, err or "cannot parse"))
        else:
            out[path] = parsed
    return out, errors


def _parse_item(item: tuple[str, str]) -> tuple[SourceFile | None, str | None]:
    return parse_file(*item)


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
