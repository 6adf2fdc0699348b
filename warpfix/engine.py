"""Run the rules over a project: discover and read files, build the model once, collect findings."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache

from warpfix import __version__
from warpfix.config import Config, ProjectConfig
from warpfix.discovery import InputError, discover, read_source
from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.model import Project, SourceFile, build_project, gc_frozen, module_name_for
from warpfix.model.file_cache import FileCache, decode, encode
from warpfix.model.project_files import mentions_warp, model_texts
from warpfix.model.taped import mark_taped, paths_context_records
from warpfix.model.trace_summary import TraceSummary
from warpfix.notebook import cell_position, is_notebook
from warpfix.rules import all_rules
from warpfix.rules.base import Rule
from warpfix.runtime_rules import RUNTIME_IDS
from warpfix.suppress import UNUSED_ID, filter_findings

__all__ = ["InputError", "discover", "read_source"]  # re-exported: discovery lives in warpfix.discovery

CACHE_DIR = ".warpfix_cache"
MAX_NESTING = 200  # AST depth beyond which the model's recursive walks cannot go
PARALLEL_MIN_FILES = 32  # smaller projects check faster than a process pool starts
# source above which a check releases each file's syntax tree once it is summarised (parsed again
# where an analysis looks into it): memory follows what the analyses read, not the project's size
RELEASE_ABOVE_BYTES = 2_000_000


@dataclass
class CheckResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    files_checked: int = 0
    sources: dict[str, str] = field(default_factory=dict)  # checked files that may hold findings
    cached: bool = False
    skipped: dict[str, int] = field(default_factory=dict)  # files not checked, by reason
    # the model's two project-wide switches (see :func:`recording`)
    recording: tuple[bool, bool] = (False, False)


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


def parse_file(path: str, text: str, index: bool = True) -> tuple[SourceFile | None, str | None]:
    try:
        return SourceFile.parse(path, text, module_name_for(path), index), None
    except SyntaxError as exc:
        where = f"line {exc.lineno}"
        cell = cell_position(text, exc.lineno or 0) if is_notebook(path) else None
        if cell is not None:
            where = f"cell {cell[0]}, line {cell[1]}"
        return None, f"syntax error at {where}: {exc.msg} (parsed as Python {sys.version_info[0]}.{sys.version_info[1]})"
    except RecursionError:
        return None, "nesting too deep to parse, skipped"
    except (ValueError, MemoryError) as exc:
        return None, f"cannot parse: {exc}"


def nesting_depth(src: SourceFile) -> int:
    """The depth of the file's syntax tree (iteratively: deep trees are what it measures)."""
    depth = {id(src.tree): 0}
    deepest = 0
    for node in src.nodes:  # breadth first: parents come before their children
        d = depth.get(id(node))
        if d is None:
            d = depth[id(node)] = depth.get(id(src.parents.get(id(node))), 0) + 1
        deepest = max(deepest, d)
    return deepest


def build_checked(files: dict[str, SourceFile], version: tuple[int, ...], errors: list[InputError]) -> Project:
    """:func:`build_project`, dropping the files nested too deeply for the analysis (each one a
    one-line error) when it runs out of recursion depth."""
    try:
        return build_project(files, version)
    except RecursionError:
        for path in [p for p, src in files.items() if nesting_depth(src) > MAX_NESTING]:
            errors.append(InputError(path, f"nesting too deep for the analysis (more than {MAX_NESTING} levels), skipped"))
            del files[path]
        return build_project(files, version)




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
    looked: set[str] = set()  # candidate paths already looked at (a package's files import alike)
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
                    if cand in looked:
                        continue
                    looked.add(cand)
                    real = os.path.realpath(cand)
                    if real in known or not os.path.isfile(cand):
                        continue
                    known.add(real)
                    text, err = read_source(cand)
                    if text is None or not mentions_warp(text):
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
    config: Config | ProjectConfig | None = None,
    jobs: int = 1,
) -> list[Finding]:
    """The findings of every selected rule, deduplicated, suppressions applied, sorted. With
    ``jobs > 1`` on a large project the project-level rule passes run in forked workers (the output
    is the same)."""
    config = config or Config()
    ran: list[str] = []
    runnable: list[str] = []
    rules = []
    for rule_cls in all_rules():
        rule = rule_cls(warp_version=project.warp_version)
        if not rule.applies_to_warp(project.warp_version):
            continue
        runnable.append(rule_cls.id)
        if not config.enables(rule_cls.id, None, select, ignore):
            continue
        ran.append(rule_cls.id)
        rules.append(rule)
    with _frozen_between_rules():
        per_rule = _check_streamed(project, rules, jobs)
    findings: dict[tuple[str, Span], Finding] = {}
    for found in per_rule:
        for f in found:
            findings.setdefault((f.rule, f.span), f)
    reported = [f for f in mark_taped(project, findings.values()) if config.enables(f.rule, f.path, select, ignore)]
    reported = [f if f.fix.safety is FixSafety.NONE or config.for_path(f.path).fixes(f.rule)
                else dataclasses.replace(f, fix=Fix(FixSafety.NONE, f.fix.description)) for f in reported]

    def ran_in(path: str) -> set[str]:
        return {r for r in ran if config.enables(r, path, select, ignore)}

    texts = {p: src.text for p, src in project.files.items()}
    known = [r.id for r in all_rules()] + list(RUNTIME_IDS)
    out = filter_findings(reported, texts, known=known, runnable=runnable,
                          ran=ran_in if UNUSED_ID in ran else None)
    out.sort(key=Finding.sort_key)
    return out


def _check_streamed(project: Project, rules: list[Rule], jobs: int) -> list[list[Finding]]:
    """Each rule's findings (in rule order), from one pass over the host traces: each trace is
    interpreted, shown to every rule and to the project's trace summary, and dropped, so that memory
    holds one root's trace at a time. The project-level parts of the rules run after the last trace
    (with ``jobs > 1`` on a large project, in forked workers: the output is the same)."""
    per_rule, live, summary = _stream_traces(project, rules)
    project.__dict__["trace_summary"] = summary  # the cached property, from the traces just seen
    gc.freeze()  # what the rules keep of the traces is never rescanned
    if jobs > 1 and len(project.files) >= PARALLEL_MIN_FILES and _can_fork():
        for k, found in zip(live, _check_forked(project, [rules[k] for k in live], jobs), strict=True):
            per_rule[k].extend(found)
    else:
        for k in live:
            _run_stage(per_rule[k], rules[k].check_project, project)
    return per_rule


def _stream_traces(project: Project, rules: list[Rule]) -> tuple[list[list[Finding]], list[int], TraceSummary]:
    """Each rule's findings from the traces (``begin`` and ``check_trace``), the rules still running
    after them, and the trace summary. Only the roots that may create a tape are traced: a rule
    reads nothing else of a trace (:meth:`warpfix.model.Project.iter_traces`)."""
    per_rule: list[list[Finding]] = [[] for _ in rules]
    live = [k for k, rule in enumerate(rules) if _run_stage(per_rule[k], rule.begin, project)]
    summary = TraceSummary()
    for trace in project.iter_traces():
        summary.add(trace)
        live = [k for k in live if _run_stage(per_rule[k], rules[k].check_trace, project, trace)]
        del trace  # not held while the next root is traced
    return per_rule, live, summary


def _run_stage(found: list[Finding], stage: Callable[..., Iterable[Finding] | None], *args: object) -> bool:
    """Add what one stage of a rule finds to ``found``; False when pathological nesting stopped the
    rule (it stops where it is, never the check)."""
    try:
        for f in stage(*args) or ():
            found.append(f)
    except RecursionError:
        return False
    return True


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
# (with what the rules kept of its traces) instead of receiving a pickled copy.
_FORKED: tuple[Project, list[Rule]] | None = None


def _check_forked(project: Project, rules: list[Rule], jobs: int) -> list[list[Finding]]:
    """Each rule's project-level findings, the rules spread over ``jobs`` forked processes (results
    in rule order)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _FORKED
    _FORKED = (project, rules)
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_check_forked_rule, range(len(rules))))
    finally:
        _FORKED = None


def _check_forked_rule(index: int) -> list[Finding]:
    assert _FORKED is not None
    project, rules = _FORKED
    found: list[Finding] = []
    _run_stage(found, rules[index].check_project, project)
    return found


@contextmanager
def _frozen_between_rules() -> Iterator[None]:
    """Keep the collector for the garbage rules make, but not rescanning the model: the objects
    alive before the rules, and after the pass over the traces, move to the permanent generation
    (``gc.freeze``), and back at the end."""
    with gc_frozen():
        yield


@contextmanager
def _collector_paused(freeze: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while a check builds its model. A check allocates
    millions of AST nodes and model objects that all stay alive until it ends; each full collection
    would rescan every one of them (a third of the parse time on large trees). With ``freeze``
    (rules run next, in a :func:`gc_frozen` block that gives it back), what was allocated meanwhile
    goes to the permanent generation: the first collection after the pause would otherwise scan
    every object of the model (0.6 s of a check of warp's sources)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if freeze:
                gc.freeze()
            gc.enable()


def check_sources(
    sources: dict[str, str],
    *,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    config: Config | ProjectConfig | None = None,
    warp_version: tuple[int, ...] | None = None,
    follow_imports: bool = False,
    parse_cache: ParseCache | None = None,
    recorded_elsewhere: tuple[bool, bool] = (False, False),
) -> CheckResult:
    """Check in-memory sources (tests, the language server). Paths are used as given;
    ``recorded_elsewhere``: see :attr:`Project.recorded_elsewhere`."""
    files: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    parse = parse_cache.parse if parse_cache is not None else parse_file
    with _collector_paused():
        for path, text in model_texts(sources).items():
            parsed, err = parse(path, text)
            if parsed is None:
                errors.append(InputError(path, err or "cannot parse"))
            else:
                files[path] = parsed
    with _collector_paused(freeze=True):
        if follow_imports:
            _follow_imports(files, errors, parse)
        project = build_checked(files, warp_version or installed_warp_version(), errors)
    project.recorded_elsewhere = recorded_elsewhere
    findings = run_rules(project, select=select, ignore=ignore, config=config)
    return CheckResult(findings, errors, len(sources), {p: s.text for p, s in files.items()},
                       recording=recording(project))


def recording(project: Project) -> tuple[bool, bool]:
    """Whether a trace of ``project`` records a kernel launch on a tape, and whether it records
    anything: the project-wide switches of the model (``TapeReach.recorded_launches``: kernel rules
    stay silent on untaped kernels; ``TapedIndex.any_recorded``: untraced code counts as taped)."""
    return project.trace_summary.recording


def sources_recording(sources: dict[str, str], parse_cache: ParseCache | None = None,
                      warp_version: tuple[int, ...] | None = None) -> tuple[bool, bool]:
    """:func:`recording` of the model of in-memory sources (no rule runs)."""
    parse = parse_cache.parse if parse_cache is not None else parse_file
    files: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    with _collector_paused():
        for path, text in model_texts(sources).items():
            parsed, _ = parse(path, text)
            if parsed is not None:
                files[path] = parsed
        _follow_imports(files, errors, parse)
        project = build_checked(files, warp_version or installed_warp_version(), errors)
        return recording(project)


def check_paths(
    paths: Sequence[str],
    *,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    config: Config | ProjectConfig | None = None,
    jobs: int = 1,
    use_cache: bool = True,
    warp_version: tuple[int, ...] | None = None,
) -> CheckResult:
    """Check files and folders. Unreadable or unparsable files become errors; the rest is checked.
    ``jobs``: processes for the rules (0: one per core)."""
    config = config or Config()
    version = warp_version or installed_warp_version()
    found = discover(paths, config)
    file_list, errors = found.files, found.errors
    texts: dict[str, str] = {}
    for p in file_list:
        text, err = read_source(p)
        if text is None:
            errors.append(InputError(p, err or "cannot read"))
        else:
            texts[p] = text
    relevant = model_texts(texts)
    key = _cache_key(relevant, select, ignore, config, version) if use_cache else None
    if key is not None:
        hit = _cache_load(key)
        if hit is not None:
            findings, parse_errors = hit
            return CheckResult(findings, errors + parse_errors, len(texts), relevant, cached=True,
                               skipped=dict(found.skipped))
    jobs = jobs if jobs > 0 else default_jobs()
    parse: ParseFn = parse_file
    large = sum(map(len, relevant.values())) > RELEASE_ABOVE_BYTES
    cache = FileCache(_rules_fingerprint()) if large and use_cache else None
    if large:
        parse = _cached(cache) if cache is not None else parse_and_release
    with _collector_paused(freeze=True):
        if large and jobs > 1 and len(relevant) >= PARALLEL_MIN_FILES and _can_fork():
            files, parse_errors = _scan_forked(relevant, jobs, cache)
        else:
            files, parse_errors = _parse_all(relevant, parse)
        _follow_imports(files, parse_errors, parse)
        project = build_checked(files, version, parse_errors)
    findings = run_rules(project, select=select, ignore=ignore, config=config, jobs=jobs)
    if key is not None:
        _cache_store(key, findings, parse_errors)
    sources = {p: s.text for p, s in files.items()}
    return CheckResult(findings, errors + parse_errors, len(texts), sources, skipped=dict(found.skipped))


def _parse_all(texts: dict[str, str], parse: ParseFn = parse_file) -> tuple[dict[str, SourceFile], list[InputError]]:
    """Parse in this process: sending syntax trees back from worker processes costs more than
    parsing them (measured: twice the CPU and a longer wall time on warp's sources)."""
    out: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    for path, text in sorted(texts.items()):
        parsed, err = parse(path, text)
        if parsed is None:
            errors.append(InputError(path, err or "cannot parse"))
        else:
            out[path] = parsed
    return out, errors


# the texts the forked scan workers read: set before the pool forks, so each worker inherits them
_SCAN: tuple[dict[str, str], FileCache | None] | None = None


def _scan_forked(texts: dict[str, str], jobs: int, cache: FileCache | None
                 ) -> tuple[dict[str, SourceFile], list[InputError]]:
    """:func:`_parse_all` with :func:`parse_and_release`, the files the cache does not hold read in
    ``jobs`` forked processes. A worker sends back each file's summary and kernel facts as the
    bytes it also writes to the cache (no tree crosses processes); the result is the same, in the
    same order, as one process's."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _SCAN
    found: dict[str, SourceFile | InputError] = {}
    todo = []
    for path, text in texts.items():
        hit = cache.load(path, text, module_name_for(path)) if cache is not None else None
        if hit is not None:
            found[path] = hit
        else:
            todo.append(path)
    if todo:
        todo.sort(key=lambda p: -len(texts[p]))  # the largest first: the chunks end together
        chunks = [todo[k::jobs * 4] for k in range(jobs * 4)]
        _SCAN = (texts, cache)
        try:
            with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
                for results in pool.map(_scan_chunk, [c for c in chunks if c]):
                    for path, blob, err in results:
                        src = decode(path, texts[path], module_name_for(path), blob) if blob is not None else None
                        found[path] = src if src is not None else InputError(path, err or "cannot parse")
        finally:
            _SCAN = None
    out: dict[str, SourceFile] = {}
    errors: list[InputError] = []
    for path in sorted(texts):
        item = found[path]
        if isinstance(item, InputError):
            errors.append(item)
        else:
            out[path] = item
    return out, errors


def _scan_chunk(paths: list[str]) -> list[tuple[str, bytes | None, str | None]]:
    assert _SCAN is not None
    texts, cache = _SCAN
    out: list[tuple[str, bytes | None, str | None]] = []
    for path in paths:
        parsed, err = parse_and_release(path, texts[path])
        if parsed is None:
            out.append((path, None, err))
            continue
        blob = encode(parsed)
        if cache is not None:
            cache.write(path, texts[path], blob)
        out.append((path, blob, None))
    return out


def _cached(cache: FileCache) -> ParseFn:
    """:func:`parse_and_release` through the file cache: an unchanged file is not read again."""
    def parse(path: str, text: str) -> tuple[SourceFile | None, str | None]:
        hit = cache.load(path, text, module_name_for(path))
        if hit is not None:
            return hit, None
        parsed, err = parse_and_release(path, text)
        if parsed is not None:
            cache.store(parsed)
        return parsed, err
    return parse


def parse_and_release(path: str, text: str) -> tuple[SourceFile | None, str | None]:
    """:func:`parse_file`, then what the model needs of the file read and its tree released: a
    large project holds a tree only for the files its analyses look into (parsed again then). A
    file that creates a tape keeps its tree: its roots are the ones a check interprets."""
    parsed, err = parse_file(path, text, index=False)
    if parsed is not None:
        try:
            parsed.scan()
        except RecursionError:
            return None, "nesting too deep for the analysis, skipped"
        if not any(unit.seed for unit in parsed.summary.units.values()):
            parsed.release()
    return parsed, err


# ---------------------------------------------------------------------------------- cache
def _cache_key(texts: dict[str, str], select: Iterable[str], ignore: Iterable[str], config: Config,
               version: tuple[int, ...]) -> str:
    h = hashlib.sha256()
    h.update(f"{__version__}|{version}|{sorted(select)}|{sorted(ignore)}|{config!r}".encode())
    h.update(_rules_fingerprint().encode())
    for p in sorted(texts):
        h.update(p.encode() + b"\0" + hashlib.sha256(texts[p].encode()).digest())
    h.update(b"|context tape" if paths_context_records(texts) else b"|")  # a tape elsewhere in the package
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
