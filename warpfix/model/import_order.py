"""Which project modules have executed by a given point of another module's import.

Module-level code of a module runs when the module is first imported, in the order of the importer's
module-level statements. A global setting made by one module (``wp.config.enable_backward = False``)
therefore affects a ``@wp.kernel`` of another module when the setting's module is imported (directly
or through the modules it imports) before the kernel's definition runs. Imports are matched to project
files by their dotted name, or its last part (``import sim`` / ``from pkg import sim``), as the rules'
other cross-file look-ups do; imports inside functions are not module-level and do not count.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from warpfix.model.source import SourceFile


def _imported_files(files: Iterable[SourceFile], node: ast.Import | ast.ImportFrom) -> list[SourceFile]:
    """The project files an import statement loads (the module, and submodules named by ``from``)."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.module:
            names.append(node.module)
        names.extend(f"{node.module}.{a.name}" if node.module else a.name for a in node.names)
    out: list[SourceFile] = []
    for src in files:
        if not src.module_name:
            continue
        leaf = src.module_name.rpartition(".")[2]
        if any(n == src.module_name or n.rpartition(".")[2] == leaf for n in names) and src not in out:
            out.append(src)
    return out


def _module_imports(src: SourceFile) -> list[ast.Import | ast.ImportFrom]:
    """Module-level imports, also those under ``if`` / ``try`` at module level, in order."""
    out: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.stmt] = list(src.tree.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.append(stmt)
        elif isinstance(stmt, ast.If):
            todo[:0] = [*stmt.body, *stmt.orelse]
        elif isinstance(stmt, ast.Try):
            todo[:0] = [*stmt.body, *stmt.orelse, *stmt.finalbody]
    return out


def executed_before(files: dict[str, SourceFile], src: SourceFile, line: int) -> set[str]:
    """Paths of the project modules whose module-level code has run when ``src``'s import reaches
    ``line``: the modules it imports above that line, and those they import, transitively."""
    done: set[str] = set()
    todo = [imp for imp in _module_imports(src) if imp.lineno < line]
    while todo:
        imp = todo.pop()
        for other in _imported_files(files.values(), imp):
            if other.path in done or other.path == src.path:
                continue
            done.add(other.path)
            todo.extend(_module_imports(other))
    return done


def runs_before(files: dict[str, SourceFile], first: SourceFile, first_line: int, second: SourceFile,
                second_line: int) -> bool:
    """Whether module-level line ``first_line`` of ``first`` runs before line ``second_line`` of
    ``second`` in some import order the project has: both in one file in that order; ``second``
    imports ``first`` (transitively) above that line; or a module imports ``first`` (transitively)
    before an import that loads ``second``, or itself sets it before importing ``second``."""
    if first.path == second.path:
        return first_line < second_line
    if first.path in executed_before(files, second, second_line):
        return True
    for importer in files.values():
        for imp in _module_imports(importer):
            if all(f.path != second.path for f in _imported_files(files.values(), imp)):
                continue
            if importer.path == first.path and first_line < imp.lineno:
                return True
            if first.path in executed_before(files, importer, imp.lineno):
                return True
    return False
