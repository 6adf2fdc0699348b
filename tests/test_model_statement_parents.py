"""SourceFile.statement_parents: an expression's surroundings up to its innermost statement, the same
as the whole file's parent map says, without building that map."""

from __future__ import annotations

import ast

from warpfix.model.source import SourceFile

CODE = """
def train(tape, params):
    for it in range(3):
        try:
            g = [p.grad for p in params]
        except RuntimeError:
            total = params[0].grad.numpy().sum()
        if it:
            print(params[1].grad)
"""


def test_each_grad_read_has_the_parents_the_whole_map_gives_up_to_its_statement() -> None:
    src = SourceFile.parse("m.py", CODE)
    reads = [n for n in src.nodes if isinstance(n, ast.Attribute) and n.attr == "grad"]
    assert len(reads) == 3
    for node in reads:
        local = src.statement_parents(node)
        cur: ast.AST = node
        while not isinstance(cur, ast.stmt):
            assert local[id(cur)] is src.parents[id(cur)]
            cur = local[id(cur)]
        assert isinstance(cur, (ast.Assign, ast.Expr)) and id(cur) not in local  # the innermost statement


def test_a_node_of_no_statement_gets_the_whole_map() -> None:
    src = SourceFile.parse("m.py", CODE)
    assert src.statement_parents(src.tree) is src.parents
