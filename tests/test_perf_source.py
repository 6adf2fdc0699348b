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


_STATEMENTS = """
import os
class C:
    x = 1
    def m(self):
        try:
            a = 1
        except ValueError as e:
            b = 2
        else:
            c = 3
        finally:
            d = 4
def f(v):
    match v:
        case [k]:
            e = k
        case _:
            pass
    with open(v) as fh:
        for line in fh:
            if line:
                g = line
            else:
                h: int = 0
    while v:
        i = v
    from os import path
"""


def test_statement_queries_before_any_full_walk_keep_ast_walk_order() -> None:
    """``nodes_of`` with statement classes alone walks the statement lists only (no node list is
    built); the answer is the one the full walk gives, in ``ast.walk`` order."""
    kinds = [(ast.Assign,), (ast.Assign, ast.AnnAssign), (ast.FunctionDef, ast.ClassDef), (ast.Import, ast.ImportFrom)]
    for text in (_STATEMENTS, inspect.getsource(warpfix.engine), inspect.getsource(ast)):
        lean = SourceFile.parse("m.py", text)
        lean.release()  # as check leaves a file after its summary: the tree is parsed again when asked for
        got = {k: lean.nodes_of(*k) for k in kinds}
        assert lean._nodes is None  # answered without the full walk
        want = [n for n in ast.walk(lean.tree)]
        for k in kinds:
            assert [id(n) for n in got[k]] == [id(n) for n in want if isinstance(n, k)], k
    assert [n.lineno for n in SourceFile.parse("m.py", _STATEMENTS, index=False).nodes_of(ast.Assign)] == [4, 27, 7, 11, 13, 17, 9, 23]
