"""What an installed library calls back on the values it is handed."""

from __future__ import annotations

import ast

from warpfix.model.library_summary import Op
from warpfix.model.source import SourceFile


def callback_ops(src: SourceFile, fn: ast.FunctionDef, params: list[str]) -> list[Op]:
    """Calls the library makes on what it was given: ``example.step()`` (method) or ``fn()`` (the
    value itself), read from the source (the parameter's name, wherever it is used), in line order."""
    found: list[tuple[int, int, Op]] = []
    names = set(params)
    # only calls inside ``fn`` can have it as their innermost function (not every call of the file)
    for node in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in names:
            root, method = f.value.id, f.attr
        elif isinstance(f, ast.Name) and f.id in names:
            root, method = f.id, ""
        else:
            continue
        enclosing = src.enclosing_functions(node)
        if not enclosing or enclosing[0] is not fn or method.startswith("_"):
            continue
        in_loop = False
        cur = src.parents.get(id(node))
        while cur is not None and cur is not fn:
            in_loop = in_loop or isinstance(cur, (ast.For, ast.While))
            cur = src.parents.get(id(cur))
        found.append((node.lineno, node.col_offset, Op("callback", method=method, binding={"target": root},
                                                          in_loop=in_loop)))
    return [op for *_, op in sorted(found, key=lambda t: (t[0], t[1]))]
