"""Run the rules over a project: discover and read files, build the model once, collect findings."""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache

from warpfix import result_cache
from warpfix.config import Config, ProjectConfig
from warpfix.discovery import InputError, discover, read_source
from warpfix.finding import Finding, Fix, FixSafety, Span
from warpfix.model import Project, SourceFile, build_project, gc_frozen
from warpfix.model.project_files import model_texts
from warpfix.model.taped import mark_taped
from warpfix.model.trace_summary import TraceSummary
from warpfix.reading import (
    PARALLEL_MIN_FILES,
    ParseCache,
    can_fork,
    parse_file,
    read_project,
)
from warpfix.reading import follow_imports as follow_project_imports
from warpfix.rules import all_rules
from warpfix.rules.base import Rule
from warpfix.runtime_rules import RUNTIME_IDS
from warpfix.suppress import UNUSED_ID, filter_findings

# re-exported: discovery lives in warpfix.discovery, file reading in warpfix.reading
__all__ = ["PARALLEL_MIN_FILES", "InputError", "ParseCache", "discover", "parse_file", "read_source"]

MAX_NESTING = 200  # AST depth beyond which the model's recursive walks cannot go


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
    if jobs > 1 and len(project.files) >= PARALLEL_MIN_FILES and can_fork():
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
            follow_project_imports(files, errors, parse)
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
        follow_project_imports(files, errors, parse)
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
    key = result_cache.key(relevant, select, ignore, config, version) if use_cache else None
    if key is not None:
        hit = result_cache.load(key)
        if hit is not None:
            findings, parse_errors = hit
            return CheckResult(findings, errors + parse_errors, len(texts), relevant, cached=True,
                               skipped=dict(found.skipped))
    jobs = jobs if jobs > 0 else default_jobs()
    with _collector_paused(freeze=True):
        files, parse_errors = read_project(relevant, jobs, result_cache.code_fingerprint() if use_cache else None)
        project = build_checked(files, version, parse_errors)
    findings = run_rules(project, select=select, ignore=ignore, config=config, jobs=jobs)
    if key is not None:
        result_cache.store(key, findings, parse_errors)
    sources = {p: s.text for p, s in files.items()}
    return CheckResult(findings, errors + parse_errors, len(texts), sources, skipped=dict(found.skipped))


