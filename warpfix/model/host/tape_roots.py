"""Which roots can create a tape: the others trace nothing a rule reads, and are not interpreted.

Every event a rule reads is recorded on a tape or is a tape operation, and both need a tape value,
which only the interpretation of a ``wp.Tape()`` call makes (a library summary never yields one, and
each root starts with no tape and fresh globals). The interpreter runs a project function only where
a value bound to it is called, and such a value is made only where the function's name is resolved:
a call, or a reference handed on and called later (``self.cb = train``, ``run(step)``). So a root
may create a tape only when its code, or a function such a reference in it resolves to (followed
only where the interpreter would inline it: the function is effectful), calls ``Tape``. References
are resolved by the effect linker (:mod:`~warpfix.model.host.effects`), the way the interpreter
resolves calls, with a name or attribute in any position read as a call of it; a class stands for
its ``__init__`` (found by name, whichever class of that name is constructed), and a classmethod's
``cls`` for its class. What a library calls back (``run(example)`` calls ``example.step()``) is
named in the library, not the project: code that names a Warp-based package (``newton``,
``wp.fem``) may create a tape, and so may code that names ``Tape`` at all."""

from __future__ import annotations

import ast

from warpfix.model.host.effects import Resolver, _cls_param_class, _library_names, _Links, _params, _Scopes
from warpfix.model.host.syntax import _WARP_LIBRARIES
from warpfix.model.library import LibraryIndex
from warpfix.model.source import SourceFile


def tape_units(files: dict[str, SourceFile], resolver: Resolver, library: LibraryIndex | None,
               own: set[str], effectful: set[int]) -> set[int]:
    """Ids of the module trees and function definitions whose run may create a tape
    (``library``: the installed packages; ``own``: the project's module names; ``effectful``: the
    functions the interpreter inlines)."""
    links = _Links(files, resolver)
    inits: dict[str, list[int]] = {}  # a class name -> the ``__init__`` its constructor runs
    for src in files.values():
        for cls in src.nodes_of(ast.ClassDef):
            init = links.find(src, cls, "__init__")
            if init is not None:
                inits.setdefault(cls.name, []).append(id(init))
    # the names worth resolving: only an effectful function passes a tape on to what runs it
    defined = {name for table in (links.functions, links.methods, inits) for name, ids in table.items()
               if any(i in effectful for i in ids)}
    defined |= {asname for src in files.values() for *_, asname in src.project_imports if asname}
    referrers: dict[int, set[int]] = {}  # id of a function -> ids of the units that may run it
    seeds: set[int] = set()
    for src in files.values():
        libs = _library_names(src, library, own)
        scopes = _Scopes(src)
        for node in src.nodes_of(ast.Name, ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name not in defined and name not in libs and name != "Tape":
                continue
            scope = scopes.around(node)
            unit = id(scope[0]) if scope else id(src.tree)
            if name == "Tape" or (name in libs and isinstance(node, ast.Name)):
                seeds.add(unit)
            for target in (*_resolved(links, src, scopes, node, scope), *inits.get(name, ())):
                referrers.setdefault(target, set()).add(unit)
        for call in src.nodes_of(ast.Call) if src.warp else ():
            wn = src.warp_name(call.func)
            if wn is not None and (wn.rpartition(".")[2] == "Tape" or wn.split(".")[0] in _WARP_LIBRARIES):
                scope = scopes.around(call)
                seeds.add(id(scope[0]) if scope else id(src.tree))
    out: set[int] = set()
    todo = list(seeds)
    while todo:
        unit = todo.pop()
        if unit in out:
            continue
        out.add(unit)
        if unit in effectful:  # only an effectful function is inlined where it is called
            todo.extend(referrers.get(unit, ()))
    return out


def _resolved(links: _Links, src: SourceFile, scopes: _Scopes, node: ast.Name | ast.Attribute,
              scope: list[ast.FunctionDef]) -> list[int]:
    """The project functions a value named by ``node`` may be bound to (as if it were called)."""
    if scope:
        out = links.callees(src, scopes, ast.Call(func=node, args=[], keywords=[]), scope) or []
        if isinstance(node, ast.Name) and node.id in _params(scope[0]):
            cls = _cls_param_class(src, scope[0], node.id)
            init = links.find(src, cls, "__init__") if cls is not None else None
            if init is not None:
                out = [*out, id(init)]
        return out
    # the module body: its globals, and any method of that name on another receiver
    target = links.expr_target(src, node)
    if target is not None:
        return links.definition_callees(target)
    name = node.id if isinstance(node, ast.Name) else node.attr
    return links.functions.get(name, []) + links.methods.get(name, [])
