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
import bisect

from warpfix.model.source import SourceFile


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


def module_imports(src: SourceFile) -> list[tuple[int, list[str]]]:
    """(line, the dotted names it imports) of each module-level import of ``src``, in order (read
    from its tree: a file summary keeps them, :class:`warpfix.model.summary.FileSummary`)."""
    return [(imp.lineno, _names(imp)) for imp in _module_imports(src)]


def _names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    names = [node.module] if node.module else []
    names.extend(f"{node.module}.{a.name}" if node.module else a.name for a in node.names)
    return names


class ImportOrder:
    """The import graph of one project's files (built once; queries are memoised). Sets of files are
    kept as bit masks over the files' numbers: a closure grows by one import at a time, and a mask
    is extended and tested without copying a set of paths."""

    def __init__(self, files: dict[str, SourceFile]) -> None:
        by_name: dict[str, list[str]] = {}
        for src in files.values():
            if src.module_name:
                by_name.setdefault(src.module_name, []).append(src.path)
                leaf = src.module_name.rpartition(".")[2]
                if leaf != src.module_name:
                    by_name.setdefault(leaf, []).append(src.path)
        self._paths = list(files)
        self._bit = {path: 1 << i for i, path in enumerate(self._paths)}
        # path -> [(line, paths the import loads)], module-level imports in line order
        self.imports: dict[str, list[tuple[int, list[str]]]] = {}
        for src in files.values():
            rows = []
            for line, names in src.summary.module_imports:  # no syntax tree is read
                loaded: list[str] = []
                for name in names:
                    for key in (name, name.rpartition(".")[2]):
                        loaded.extend(p for p in by_name.get(key, ()) if p not in loaded)
                if loaded:
                    rows.append((line, loaded))
            self.imports[src.path] = sorted(rows, key=lambda row: row[0])
        self._lines = {path: [ln for ln, _ in rows] for path, rows in self.imports.items()}
        self._importers: dict[str, list[tuple[str, int]]] = {}  # path -> (importer, line) of the imports loading it
        for importer, rows in self.imports.items():
            for line, loaded in rows:
                for path in loaded:
                    self._importers.setdefault(path, []).append((importer, line))
        # memoised per (path, number of the path's imports above the line): the answer changes only
        # at an import, and each one extends the closure of the imports above it
        self._before: dict[tuple[str, int], int] = {}

    def _above(self, path: str, line: int) -> int:
        """How many of the module-level imports of ``path`` sit above ``line``."""
        return bisect.bisect_left(self._lines.get(path, []), line)

    def _paths_of(self, mask: int) -> frozenset[str]:
        return frozenset(path for path in self._paths if mask & self._bit[path])

    def executed_before(self, path: str, line: int) -> frozenset[str]:
        """Paths of the project modules whose module-level code has run when the import of ``path``
        reaches ``line``: the modules it imports above that line, and those they import, transitively."""
        return self._paths_of(self._executed_after_imports(path, self._above(path, line)))

    def _executed_after_imports(self, path: str, count: int) -> int:
        """:meth:`executed_before` the line below the first ``count`` imports of ``path``, as a mask."""
        key = (path, count)
        hit = self._before.get(key)
        if hit is not None:
            return hit
        if count == 0:
            self._before[key] = 0
            return 0
        done = self._executed_after_imports(path, count - 1)
        own = self._bit.get(path, 0)
        todo = list(self.imports[path][count - 1][1])
        while todo:
            other = todo.pop()
            bit = self._bit.get(other, 0)
            if done & bit or bit == own:
                continue
            done |= bit
            todo.extend(p for _, loaded in self.imports.get(other, ()) for p in loaded)
        self._before[key] = done
        return done

    def runs_before(self, first: str, first_line: int, second: str, second_line: int) -> bool:
        """Whether module-level line ``first_line`` of file ``first`` runs before line ``second_line``
        of ``second`` in some import order the project has: both in one file in that order; ``second``
        imports ``first`` (transitively) above that line; or a module imports ``first`` (transitively)
        before an import that loads ``second``, or itself runs that line before importing ``second``."""
        if first == second:
            return first_line < second_line
        bit = self._bit.get(first, 0)
        if self._executed_after_imports(second, self._above(second, second_line)) & bit:
            return True
        # a module imports ``first`` (or is ``first`` below that line) before an import that loads ``second``
        for importer, line in self._importers.get(second, ()):
            if (importer == first and first_line < line) or (
                    self._executed_after_imports(importer, self._above(importer, line)) & bit):
                return True
        return False
