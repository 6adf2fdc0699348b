"""A parsed source file and the names under which it sees the ``warp`` module."""

from __future__ import annotations

import ast
import itertools
from array import array
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from warpfix.finding import Span
from warpfix.model.tree_walks import (
    definitions_in,
    innermost_statement,
    parents_of,
    statements_in,
    walk_nodes,
    walk_with_parents,
)

if TYPE_CHECKING:
    from warpfix.model.facts import KernelDef
    from warpfix.model.summary import FileSummary


@dataclass
class WarpNames:
    """Local names bound to warp: ``import warp as wp`` -> modules {"wp": ""};
    ``import warp.sim`` -> modules {"warp": ""}; ``from warp import where as w`` -> names {"w": "where"};
    ``from warp.sim import Model`` -> names {"Model": "sim.Model"}."""

    modules: dict[str, str] = field(default_factory=dict)  # local name -> warp sub-path ("" = warp itself)
    names: dict[str, str] = field(default_factory=dict)  # local name -> dotted path below warp

    def __bool__(self) -> bool:
        return bool(self.modules or self.names)


def _imports(nodes: list[ast.AST]) -> tuple[WarpNames, list[tuple[str, int, str | None, str | None]]]:
    """Warp imports anywhere in the file (functions import warp lazily too), and the other imports
    as (module, level, name, asname) for resolving project modules."""
    warp = WarpNames()
    project: list[tuple[str, int, str | None, str | None]] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top, _, rest = alias.name.partition(".")
                if top == "warp":
                    if alias.asname:
                        warp.modules[alias.asname] = rest
                    else:
                        warp.modules["warp"] = ""
                else:
                    project.append((alias.name, 0, None, alias.asname))
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            top, _, rest = mod.partition(".")
            if node.level == 0 and top == "warp":
                for alias in node.names:
                    path = f"{rest}.{alias.name}" if rest else alias.name
                    warp.names[alias.asname or alias.name] = path
                continue
            for alias in node.names:
                project.append((mod, node.level, alias.name, alias.asname))
    return warp, project


@dataclass
class SourceFile:
    """A parsed file. Its syntax tree (and the node index built on it) can be released
    (:meth:`release`) and is parsed again, from the same text, the first time it is asked for: a
    check of a large project keeps only the trees of the files its analyses look into. What it
    knows without its tree (path, text, module name, warp names, imports) stays."""

    path: str  # as displayed (relative to the cwd when given so)
    text: str
    _tree: ast.Module | None
    warp: WarpNames
    project_imports: list[tuple[str, int, str | None, str | None]]
    module_name: str = ""  # dotted module name relative to the project root ("pkg.sim")
    _lines: list[str] | None = None
    _nodes: list[ast.AST] | None = None
    _parents: dict[int, ast.AST] | None = None  # id(node) -> parent node
    _by_type: dict[tuple[type, ...], list] = field(default_factory=dict)
    _positions: dict[type, array] | None = None
    # id(node) -> (node, warp_name(node)): asked for again at every interpretation of the node
    _warp_names: dict[int, tuple[ast.AST, str | None]] = field(default_factory=dict, repr=False)
    # id(node) -> (node, :meth:`statement_parents` of it)
    _stmt_parents: dict[int, tuple[ast.AST, dict[int, ast.AST]]] = field(default_factory=dict, repr=False)
    _defs: dict[tuple[int, int], ast.AST] | None = field(default=None, repr=False)
    _top: set[int] | None = field(default=None, repr=False)  # ids of the module body's statements
    _summary: FileSummary | None = field(default=None, repr=False)  # survives a release
    _kernels: list[KernelDef] | None = field(default=None, repr=False)  # see :meth:`scan`
    indexed: bool = True  # warp names and imports known (see :meth:`parse`)

    @classmethod
    def parse(cls, path: str, text: str, module_name: str = "", index: bool = True) -> SourceFile:
        """Parse ``text``. With ``index`` the node index is built now (every node, its parent, the
        warp names); without, :meth:`scan` reads the imports in its own pass over the tree."""
        tree = ast.parse(text, filename=path)
        if not index:
            src = cls(path, text, tree, WarpNames(), [], module_name)
            src.indexed = False
            return src
        nodes, parents = walk_with_parents(tree)
        warp, project = _imports(nodes)
        src = cls(path, text, tree, warp, project, module_name)
        src._nodes, src._parents = nodes, parents
        return src

    def set_imports(self, imports: list[ast.AST]) -> None:
        """The warp names and project imports, from every import statement (``ast.walk`` order)."""
        self.warp, self.project_imports = _imports(imports)
        self.indexed = True

    def import_bindings(self, index: dict[str, tuple], stars: list[tuple[str, int]]) -> None:
        """Enter the names the project imports bind into a module ``index`` (``("module", mod, level)``
        or ``("from", mod, level, name)``), and each star import into ``stars``."""
        for mod, level, name, asname in self.project_imports:
            if name is None:
                if asname or "." not in mod:
                    index[asname or mod.split(".")[0]] = ("module", mod, level)
            elif name == "*":
                stars.append((mod, level))
            else:
                index[asname or name] = ("from", mod, level, name)

    @property
    def summary(self) -> FileSummary:
        """What the file contributes to the project-wide analyses (:mod:`warpfix.model.summary`),
        computed once: it outlives a :meth:`release`."""
        if self._summary is None:
            from warpfix.model.summary import summarize

            self._summary = summarize(self)
        return self._summary

    @property
    def tree(self) -> ast.Module:
        if self._tree is None:
            self._tree = ast.parse(self.text, filename=self.path)
        return self._tree

    @property
    def materialized(self) -> bool:
        """Whether the syntax tree is in memory now."""
        return self._tree is not None

    def release(self) -> None:
        """Drop the syntax tree and everything built on it; the next use parses the text again.
        Only for a file no analysis holds a node of (the model releases files as it reads them,
        before any node of theirs is kept)."""
        self._tree = self._nodes = self._parents = self._positions = self._defs = self._lines = self._top = None
        self._by_type = {}
        self._warp_names = {}
        self._stmt_parents = {}
        for k in self._kernels or ():
            k.release_node()

    def scan(self) -> None:
        """Read from the tree what a model of the project needs of every file: the summary, and the
        kernel facts (taken by the next :func:`warpfix.model.build_project`); then the tree can be
        released."""
        from warpfix.model.kernels import find_kernels
        from warpfix.model.summary import summarize_with_definitions

        self._summary, defs = summarize_with_definitions(self)
        self._kernels = list(find_kernels(self, defs)) if self.warp else []

    def take_kernels(self) -> list[KernelDef] | None:
        """The kernel facts :meth:`scan` read (once: a model folds ``@wp.func`` effects into them)."""
        out, self._kernels = self._kernels, None
        return out

    @property
    def nodes(self) -> list[ast.AST]:
        """Every node of the tree in ``ast.walk`` order, computed once (rules walk trees often)."""
        if self._nodes is None:
            self._nodes = walk_nodes(self.tree)
        return self._nodes

    @property
    def parents(self) -> dict[int, ast.AST]:
        """Each node's parent, by ``id`` of the node (computed when first asked for: many files
        parsed again after a release are only looked up)."""
        if self._parents is None:
            if self._nodes is None:
                self._nodes, self._parents = walk_with_parents(self.tree)
            else:
                self._parents = parents_of(self._nodes)
        return self._parents

    def top_level(self, stmt: ast.AST) -> bool:
        """Whether ``stmt`` is a statement of the module body itself (not nested in an ``if``)."""
        if self._top is None:
            self._top = {id(s) for s in self.tree.body}
        return id(stmt) in self._top

    def statement_parents(self, node: ast.AST) -> dict[int, ast.AST]:
        """The parent map of the innermost statement holding ``node``: its expressions up to that
        statement (which has no parent in it). For a question about one expression's surroundings in
        its statement, without building the whole file's map; the whole map when the statement is not
        found (a node of no statement list)."""
        hit = self._stmt_parents.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        line = getattr(node, "lineno", None)
        stmt = innermost_statement(self.tree.body, line) if line is not None else None
        if stmt is None:
            return self.parents
        parents: dict[int, ast.AST] = {}
        todo: list[ast.AST] = [stmt]
        nested = (ast.stmt, ast.excepthandler, ast.match_case)
        while todo:
            cur = todo.pop()
            for name in cur._fields:  # as ``walk_with_parents``: ``ast.iter_child_nodes`` costs twice as much
                value = getattr(cur, name, None)
                for child in value if value.__class__ is list else (value,):
                    if isinstance(child, ast.AST) and not isinstance(child, nested):
                        parents[id(child)] = cur
                        todo.append(child)
        out = parents if id(node) in parents else self.parents
        self._stmt_parents[id(node)] = (node, out)  # an unrolled loop reads one node again and again
        return out

    def definition_at(self, line: int, column: int) -> ast.AST:
        """The function or class defined at ``line``/``column`` (its ``def``/``class`` keyword)."""
        if self._defs is None:
            self._defs = definitions_in(self.tree)
        return self._defs[(line, column)]

    def enclosing_functions(self, node: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions around ``node``, innermost first."""
        out = []
        cur = self.parents.get(id(node))
        while cur is not None:
            if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(cur)
            cur = self.parents.get(id(cur))
        return out

    def nodes_of(self, *types: type) -> list:
        """The nodes of the given types, in ``ast.walk`` order (cached per type tuple)."""
        hit = self._by_type.get(types)
        if hit is None:
            if self._nodes is None and all(type(t) is type and issubclass(t, ast.stmt) for t in types):
                # statements only: found through the statement lists, no expression is visited
                hit = [n for n in statements_in(self.tree) if isinstance(n, types)]
            elif all(type(t) is type for t in types):  # plain classes: isinstance is issubclass of type()
                groups = self._positions_by_class()
                matching = [pos for cls, pos in groups.items() if issubclass(cls, types)]
                positions = matching[0] if len(matching) == 1 else sorted(itertools.chain(*matching))
                nodes = self.nodes
                hit = [nodes[i] for i in positions]
            else:  # ast.Num and friends answer isinstance through their metaclass
                hit = [n for n in self.nodes if isinstance(n, types)]
            self._by_type[types] = hit
        return hit

    def _positions_by_class(self) -> dict[type, array]:
        """Positions in :attr:`nodes` of each node class (one pass; every query after it is a lookup;
        compact arrays, not lists of ints: they live as long as the file)."""
        if self._positions is None:
            groups: dict[type, array] = {}
            for i, n in enumerate(self.nodes):
                cls = type(n)
                group = groups.get(cls)
                if group is None:
                    groups[cls] = array("l", (i,))
                else:
                    group.append(i)
            self._positions = groups
        return self._positions

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
        if node.__class__ is ast.Name:  # a look-up: the module alias itself, or a name imported from warp
            name = node.id  # type: ignore[attr-defined]
            modules = self.warp.modules
            return modules[name] if name in modules else self.warp.names.get(name)
        if not isinstance(node, ast.Attribute):
            return None
        hit = self._warp_names.get(id(node))
        if hit is None or hit[0] is not node:
            hit = self._warp_names[id(node)] = (node, self._warp_name(node))
        return hit[1]

    def _warp_name(self, node: ast.AST) -> str | None:
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


@lru_cache(maxsize=4096)
def same_code(a: str, b: str) -> bool:
    """Whether two expression texts are one expression, quotes, spacing and redundant parentheses aside
    (``b["q"][t]`` as written and ``b['q'][t]`` as a finding's data gives it)."""
    if a == b:
        return True
    try:
        return ast.unparse(ast.parse(a, mode="eval")) == ast.unparse(ast.parse(b, mode="eval"))
    except SyntaxError:
        return False
