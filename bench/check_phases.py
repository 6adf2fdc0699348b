"""Where a ``warpfix check`` spends its CPU and memory, phase by phase (a benchmark, not a test).

Runs the real command line in this process (``--jobs 1`` is added so the rules run here, not in
workers) with the engine's phases wrapped, and prints to stderr each phase's CPU seconds, calls
and resident memory after it; stdout is the command's own output. Nested phases overlap: the
engine streams the host traces through the rules, so "traces and rules, in all" holds both the
roots' interpretation and the rules' stages.

    python bench/check_phases.py check --no-cache --format json PATH > out.json
"""

from __future__ import annotations

import functools
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

from warpfix import cli, engine, model, reading, result_cache

_PHASES: dict[str, list[float]] = {}  # name -> [calls, cpu seconds, rss after the last call (MB)]


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            entry = _PHASES.setdefault(name, [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += time.process_time() - start
            entry[2] = _rss_mb()
    return wrapper


def _instrument() -> None:
    for attr, name in (("discover", "discovery"), ("read_source", "read"),
                       ("read_project", "parse and summarise, in all"), ("follow_project_imports", "follow imports"),
                       ("build_checked", "kernel facts (build_project)"),
                       ("_check_streamed", "traces and rules, in all"), ("_run_stage", "rule stages"),
                       ("mark_taped", "mark taped"), ("filter_findings", "suppressions")):
        setattr(engine, attr, _timed(name, getattr(engine, attr)))
    result_cache.key = _timed("cache key", result_cache.key)
    reading.parse_all = _timed("parse", reading.parse_all)
    model._run_root = _timed("host traces (one root each)", model._run_root)  # type: ignore[attr-defined]


def main(argv: list[str]) -> int:
    _instrument()
    if argv[:1] == ["check"] and "--jobs" not in argv:
        argv = [*argv, "--jobs", "1"]
    try:
        return cli.main(argv)
    finally:
        for name, (calls, cpu, rss) in _PHASES.items():
            print(f"{name:30s} {cpu:8.2f} s CPU  {int(calls):6d} calls  {rss:7.0f} MB after", file=sys.stderr)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{'whole process':30s} {time.process_time():8.2f} s CPU  peak {peak:.0f} MB", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
