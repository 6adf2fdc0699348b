"""Walks over a syntax tree that the model makes on every file, written against ``_fields`` directly
(``ast.walk`` and ``ast.iter_child_nodes`` cost twice as much: two generators per node): every node
in ``ast.walk`` order with or without its parent, the statements alone, the definitions alone."""

from __future__ import annotations

import ast


def walk_with_parents(tree: ast.AST) -> tuple[list[ast.AST], dict[int, ast.AST]]:
    """All nodes (breadth-first, in ``ast.walk`` order) and each node's parent, in one pass. Reads
    each node's ``_fields`` directly: ``ast.iter_child_nodes`` costs twice as much (two generators
    per node), and this walk runs over every node of every file."""
    nodes: list[ast.AST] = [tree]
    parents: dict[int, ast.AST] = {}
    append = nodes.append
    for node in nodes:  # grows while it is read: breadth first
        for name in node._fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for child in value:
                    if isinstance(child, ast.AST):
                        parents[id(child)] = node
                        append(child)
            elif isinstance(value, ast.AST):
                parents[id(value)] = node
                append(value)
    return nodes, parents


def parent_map(node: ast.AST) -> dict[int, ast.AST]:
    """Each node's parent below ``node`` (by ``id`` of the node), as ``ast.walk`` and
    ``ast.iter_child_nodes`` give it, from :func:`walk_with_parents`'s one pass."""
    return walk_with_parents(node)[1]


BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def statements_in(tree: ast.Module) -> list[ast.AST]:
    """Every statement (and ``except`` handler and ``match`` case) in ``ast.walk`` order: breadth
    first through the statement lists alone. Only statements hold statements, so leaving the
    expressions out keeps the statements' relative order."""
    nodes: list[ast.AST] = [tree]
    append = nodes.append
    for node in nodes:  # grows while it is read: breadth first
        for name in node._fields:
            if name in BODIES:
                for child in getattr(node, name, None) or ():
                    append(child)
    return nodes[1:]


def definitions_in(tree: ast.Module) -> dict[tuple[int, int], ast.AST]:
    """Every ``def`` and ``class`` statement by its line and column, found through the statement
    lists alone (a definition is a statement: no expression is visited)."""
    out: dict[tuple[int, int], ast.AST] = {}
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[(node.lineno, node.col_offset)] = node
        for name in BODIES:
            block = getattr(node, name, None)
            if block:
                todo.extend(block)
    return out


def innermost_statement(block: list[ast.stmt], line: int) -> ast.stmt | None:
    """The innermost statement of ``block`` (or of the statement lists nested in it) whose lines hold ``line``."""
    for stmt in block:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            for name in BODIES:
                for inner in getattr(stmt, name, None) or ():
                    nested = inner.body if isinstance(inner, (ast.excepthandler, ast.match_case)) else [inner]
                    found = innermost_statement(nested, line)  # type: ignore[arg-type]
                    if found is not None:
                        return found
            return stmt
    return None


def walk_nodes(tree: ast.AST) -> list[ast.AST]:
    """:func:`walk_with_parents`'s nodes alone."""
    nodes: list[ast.AST] = [tree]
    append = nodes.append
    for node in nodes:  # grows while it is read: breadth first
        for name in node._fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for child in value:
                    if isinstance(child, ast.AST):
                        append(child)
            elif isinstance(value, ast.AST):
                append(value)
    return nodes


def parents_of(nodes: list[ast.AST]) -> dict[int, ast.AST]:
    """:func:`walk_with_parents`'s parents, from its nodes."""
    parents: dict[int, ast.AST] = {}
    for node in nodes:
        for name in node._fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for child in value:
                    if isinstance(child, ast.AST):
                        parents[id(child)] = node
            elif isinstance(value, ast.AST):
                parents[id(value)] = node
    return parents
