"""The result cache: a check's findings stored under ``.warpfix_cache/`` in the working folder,
keyed on the checked files' contents, the configuration and warpfix's own code."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from functools import cache

from warpfix import __version__
from warpfix.config import Config
from warpfix.discovery import InputError
from warpfix.finding import Finding, Fix, FixSafety, Severity, Span
from warpfix.model.taped import paths_context_records

CACHE_DIR = ".warpfix_cache"


def key(texts: dict[str, str], select: Iterable[str], ignore: Iterable[str], config: Config,
        version: tuple[int, ...]) -> str:
    """The cache key of a check of ``texts`` with these settings."""
    h = hashlib.sha256()
    h.update(f"{__version__}|{version}|{sorted(select)}|{sorted(ignore)}|{config!r}".encode())
    h.update(code_fingerprint().encode())
    for p in sorted(texts):
        h.update(p.encode() + b"\0" + hashlib.sha256(texts[p].encode()).digest())
    h.update(b"|context tape" if paths_context_records(texts) else b"|")  # a tape elsewhere in the package
    return h.hexdigest()


@cache
def code_fingerprint() -> str:
    """Changes whenever warpfix's own code changes (editable installs, development)."""
    root = os.path.dirname(__file__)
    h = hashlib.sha256()
    for dirpath, _, names in sorted(os.walk(root)):
        for n in sorted(names):
            if n.endswith(".py"):
                st = os.stat(os.path.join(dirpath, n))
                h.update(f"{n}:{st.st_mtime_ns}:{st.st_size}".encode())
    return h.hexdigest()


def _path(key: str) -> str:
    return os.path.join(CACHE_DIR, key[:2], key + ".json")


def load(key: str) -> tuple[list[Finding], list[InputError]] | None:
    try:
        with open(_path(key), encoding="utf-8") as fh:
            data = json.load(fh)
        findings = [_finding_from_json(d) for d in data["findings"]]
        errors = [InputError(e["path"], e["message"]) for e in data["errors"]]
        return findings, errors
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(key: str, findings: list[Finding], errors: list[InputError]) -> None:
    path = _path(key)
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
