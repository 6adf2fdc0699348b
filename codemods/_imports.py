"""``from typing import Any`` for a codemod's generic ``@wp.func``/kernel, where isort would put it.

libcst's ``AddImportsVisitor`` appends a new import after the file's last one, after ``import warp as wp``,
which ruff's isort rule (I001) then reports in every project that sorts its imports. Here the import goes
into the standard-library group: after its straight ``import x`` lines and the ``from x import`` lines that
sort before ``typing``; a file with no standard-library import gets a group of its own before its first
import. An existing ``from typing import ...`` takes the name, in isort's order of its names.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import libcst as cst
from libcst.codemod.visitors import AddImportsVisitor

from codemods._cst import dotted

if TYPE_CHECKING:
    from codemods._base import FindingCommand

_SCRATCH_KEY = "warpfix.typing_any"


def _top_import(stmt: cst.CSTNode) -> tuple[str, bool] | None:
    """(module, is a from-import) of a module-level line holding one import, else None."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Import):
        return dotted(small.names[0].name) or "", False
    if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
        return dotted(small.module) or "", True
    return None


def _imports_any(stmt: cst.SimpleStatementLine) -> bool:
    names = stmt.body[0].names  # type: ignore[union-attr]
    return isinstance(names, cst.ImportStar) or any(dotted(a.name) == "Any" and a.asname is None for a in names)


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's isort order of imported names (``order-by-type``): CONSTANTS, then Classes, then the rest."""
    return (0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2), name


def _with_any(node: cst.ImportFrom) -> cst.ImportFrom:
    """``node`` importing ``Any`` too: in isort's place when its names are in isort's order, else last."""
    names = list(node.names)  # type: ignore[arg-type] - not a star import (`_imports_any` holds for one)
    keys = [_isort_key(dotted(a.name) or "") for a in names]
    at = sum(k < _isort_key("Any") for k in keys) if keys == sorted(keys) else len(names)
    sep = next((a.comma for a in names[:-1]), cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    if at < len(names):
        names.insert(at, cst.ImportAlias(cst.Name("Any"), comma=sep))
    else:
        names[-1], last_comma = names[-1].with_changes(comma=sep), names[-1].comma
        names.append(cst.ImportAlias(cst.Name("Any"), comma=last_comma))
    return node.with_changes(names=names)


def need_typing_any(cmd: FindingCommand) -> None:
    """Make ``Any`` (from ``typing``) importable in the file ``cmd`` rewrites; once per rewrite."""
    if cmd.context.scratch.get(_SCRATCH_KEY):
        return
    cmd.context.scratch[_SCRATCH_KEY] = True
    imports = [(stmt, *info) for stmt in cmd.tree.body if (info := _top_import(stmt)) is not None]
    typing_from = [stmt for stmt, module, is_from in imports if is_from and module == "typing"]
    if typing_from:
        if not any(_imports_any(stmt) for stmt in typing_from):
            line = typing_from[0]
            cmd.replace(line, lambda node: node.with_changes(body=[_with_any(node.body[0])]))
        return
    new = cmd.statement("from typing import Any\n")
    stdlib = [(stmt, module, is_from) for stmt, module, is_from in imports
              if module.split(".")[0] in sys.stdlib_module_names and module != "__future__"]  # fmt: skip
    if stdlib:
        before = [stmt for stmt, module, is_from in stdlib if not is_from or module.lower() < "typing"]
        if before:
            cmd.insert_after(before[-1], [new])
        else:  # every from-import of the group sorts after typing
            cmd.insert_before(stdlib[0][0], [new])
        return
    first = next((stmt for stmt, module, _ in imports if module != "__future__"), None)
    if first is None:
        AddImportsVisitor.add_needed_import(cmd.context, "typing", "Any")
        return
    cmd.insert_before(first, [new])
    edit = cmd._edit(first)  # the group's first import gets the blank line that ends ours
    previous = edit.replace
    edit.replace = lambda node: (previous(node) if previous else node).with_changes(leading_lines=[cst.EmptyLine()])
