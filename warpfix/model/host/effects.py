"""Which project functions can produce an event at all (the others are never inlined)."""

from __future__ import annotations

import ast

from warpfix.model.host.syntax import _ALLOC, _ALLOC_LIKE, _LAUNCH, _WARP_LIBRARIES
from warpfix.model.library import LibraryIndex
from warpfix.model.source import SourceFile

_EFFECT_WARP = {
    *_ALLOC, *_ALLOC_LIKE, *_LAUNCH, "clone", "copy", "Tape", "set_module_options",
}
_EFFECT_METHODS = {"zero_", "fill_", "assign", "backward", "zero", "reset", "append"}


def _library_names(src: SourceFile, library: LibraryIndex | None, own: set[str]) -> set[str]:
    """Local names the file binds to installed Warp-based packages (``import newton``) that are not
    part of the checked project (``own``: its module names)."""
    if library is None:
        return set()
    out = set()
    for mod, level, name, asname in src.project_imports:
        top = mod.split(".")[0]
        if level or not mod or top in own or not library.has_package(top):
            continue
        if name is None:
            out.add(asname or mod.split(".")[0])
        elif name != "*":
            out.add(asname or name)
    return out


def _effectful_functions(files: dict[str, SourceFile], library: LibraryIndex | None = None,
                         own: set[str] | frozenset[str] = frozenset()) -> set[int]:
    """Ids of the functions whose execution can produce an event: they (or a project function they
    call, by name) allocate, launch, copy, tape, zero, touch ``.grad`` or enter a ``with`` on a value.
    Everything else is not inlined: its effects on arrays are nil, and skipping it keeps the
    interpretation linear in the size of the code that matters."""
    defs: dict[str, list[int]] = {}
    calls: dict[int, set[str]] = {}
    direct: set[int] = set()
    for src in files.values():
        for fn in src.nodes_of(ast.FunctionDef):
            defs.setdefault(fn.name, []).append(id(fn))
            calls.setdefault(id(fn), set())
        libs = _library_names(src, library, set(own))
        for node in src.nodes_of(ast.Call, ast.Attribute, ast.With):
            hit = False
            called: str | None = None
            if isinstance(node, ast.Call):
                f = node.func
                wn = src.warp_name(f)
                root = f
                while isinstance(root, ast.Attribute):
                    root = root.value
                if wn is not None:
                    hit = wn.rpartition(".")[2] in _EFFECT_WARP or wn.split(".")[0] in _WARP_LIBRARIES
                elif isinstance(root, ast.Name) and root.id in libs:
                    hit = True  # a call into a Warp-based library: its summary may touch arrays
                elif isinstance(f, ast.Attribute):
                    hit = f.attr in _EFFECT_METHODS
                    called = f.attr
                elif isinstance(f, ast.Name):
                    called = f.id
                    inner = src.enclosing_functions(node)[:1]
                    # ``fn()`` on a parameter: a runner calling back what it was handed (``run(n, ex.step)``)
                    hit = bool(inner) and f.id in {a.arg for a in (*inner[0].args.posonlyargs, *inner[0].args.args,
                                                                    *inner[0].args.kwonlyargs)}
            elif isinstance(node, ast.Attribute):
                hit = node.attr in ("grad", "retain_grad", "requires_grad")
            else:
                hit = any(not isinstance(i.context_expr, ast.Call) for i in node.items)
            if not hit and called is None:
                continue
            for fn in src.enclosing_functions(node):
                if hit:
                    direct.add(id(fn))
                if called is not None:
                    calls.setdefault(id(fn), set()).add(called)
    effectful = set(direct)
    changed = True
    while changed:
        changed = False
        for fid, names in calls.items():
            if fid not in effectful and any(d in effectful for n in names for d in defs.get(n, ())):
                effectful.add(fid)
                changed = True
    return effectful
