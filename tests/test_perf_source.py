"""The model's one walk over each syntax tree: same nodes, order and parents as ``ast.walk``."""

from __future__ import annotations

import ast
import inspect

import warpfix.engine
import warpfix.model.host
from warpfix.model.source import SourceFile


def _reference(tree: ast.AST) -> tuple[list[ast.AST], dict[int, ast.AST]]:
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    return list(ast.walk(tree)), parents


def test_walk_matches_ast_walk_on_real_code() -> None:
    for module in (warpfix.model.host, warpfix.engine, ast):
        text = inspect.getsource(module)
        src = SourceFile.parse("m.py", text)
        nodes, parents = _reference(src.tree)
        assert [id(n) for n in src.nodes] == [id(n) for n in nodes]
        # shared singletons (ast.Load()) have several parents; ast.walk's last one wins in both
        assert src.parents == parents


def test_walk_reaches_optional_and_list_fields() -> None:
    src = SourceFile.parse("m.py", "def f(a, *b, c=1, **d) -> int:\n    return [x async for x in y if x]\n")
    kinds = {type(n).__name__ for n in src.nodes}
    assert {"arguments", "arg", "Constant", "ListComp", "comprehension", "Return", "Name"} <= kinds
    assert len(src.nodes) == len(list(ast.walk(src.tree)))
