"""A parsed source file and the names under which it sees the ``warp`` module."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from warpfix.finding import Span


@dataclass
class WarpNames:
    """Local names bound to warp: ``import warp as wp`` -> modules {"wp": ""};
    ``import warp.sim`` -> modules {"warp": ""}; ``from warp import where as w`` -> names {"w": "where"};
    ``from warp.sim import Model`` -> names {"Model": "sim.Model"}."""

    modules: dict[str, str] = field(default_factory=dict)  # local name -> warp sub-path ("" = warp itself)
    names: dict[str, str] = field(default_factory=dict)  # local name -> dotted path below warp

    def __bool__(self) -> bool:
        return bool(self.modules or self.names)


class _ImportVisitor(ast.NodeVisitor):
    """Collects warp imports anywhere in the file (functions import warp lazily too)."""

    def __init__(self) -> None:
        self.warp = WarpNames()
        self.project_imports: list[tuple[str, int, str | None, str | None]] = []  # module, level, name, asname

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top, _, rest = alias.name.partition(".")
            if top == "warp":
                if alias.asname:
                    self.warp.modules[alias.asname] = rest
                else:
                    self.warp.modules["warp"] = ""
            else:
                self.project_imports.append((alias.name, 0, None, alias.asname))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        top, _, rest = mod.partition(".")
        if node.level == 0 and top == "warp":
            for alias in node.names:
                local = alias.asname or alias.name
                path = f"{rest}.{alias.name}" if rest else alias.name
                self.warp.names[local] = path
            return
        for alias in node.names:
            self.project_imports.append((mod, node.level, alias.name, alias.asname))


@dataclass
class SourceFile:
    path: str  # as displayed (relative to the cwd when given so)
    text: str
    tree: ast.Module
    warp: WarpNames
    project_imports: list[tuple[str, int, str | None, str | None]]
    module_name: str = ""  # dotted module name relative to the project root ("pkg.sim")
    _lines: list[str] | None = None

    @classmethod
    def parse(cls, path: str, text: str, module_name: str = "") -> SourceFile:
        tree = ast.parse(text, filename=path)
        visitor = _ImportVisitor()
        visitor.visit(tree)
        return cls(path, text, tree, visitor.warp, visitor.project_imports, module_name)

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.text.splitlines()
        return self._lines

    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            end_col = col
        return Span(self.path, line, self._char_col(line, col) + 1, end_line, self._char_col(end_line, end_col) + 1)

    def _char_col(self, line: int, byte_col: int) -> int:
        """ast columns are UTF-8 byte offsets; report character columns."""
        if line - 1 < len(self.lines):
            text = self.lines[line - 1]
            if not text.isascii():
                return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))
        return byte_col

    def warp_name(self, node: ast.AST) -> str | None:
        """The dotted path below ``warp`` that ``node`` refers to, e.g. ``"where"`` for ``wp.where``,
        ``"types.float32"`` for ``wp.types.float32``; None when it is not a warp name."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.reverse()
        if node.id in self.warp.modules:
            base = self.warp.modules[node.id]
            full = ([base] if base else []) + parts
            return ".".join(full) if full else ""
        if node.id in self.warp.names:
            return ".".join([self.warp.names[node.id], *parts])
        return None

    def is_warp(self, node: ast.AST, *names: str) -> bool:
        """Whether ``node`` names one of ``names`` in warp (the last path component is compared,
        so ``wp.types.float32`` matches ``"float32"`` and ``wp.sim.Model`` matches ``"Model"``)."""
        wn = self.warp_name(node)
        if wn is None:
            return False
        return wn in names or wn.rpartition(".")[2] in names
