"""The libcst shapes every codemod reads and edits: dotted names, calls and their arguments (a
keyword, the positional ones, a list argument such as a launch's ``inputs=``), assignment targets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import libcst as cst


def dotted(node: cst.BaseExpression) -> str | None:
    """``wp.sqrt`` for an Attribute chain of Names, ``x`` for a Name, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def call_name(node: cst.CSTNode) -> str | None:
    """The last component of a call's function name (``sqrt`` for ``wp.sqrt(...)``)."""
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def is_warp_call(node: cst.CSTNode, *names: str) -> bool:
    """``wp.<name>(...)`` / ``warp.<name>(...)`` (any module alias) or a bare ``<name>(...)``."""
    return call_name(node) in names


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    """``call`` without its ``name=`` argument, commas and closing whitespace kept tidy."""
    args = list(call.args)
    index = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == name), None)
    if index is None:
        return call
    removed = args.pop(index)
    if index == len(args) and index > 0:
        args[-1] = args[-1].with_changes(comma=removed.comma, whitespace_after_arg=removed.whitespace_after_arg)
    return call.with_changes(args=args)


def append_item(
    items: Sequence[Any], new: Any, opening: cst.BaseParenthesizableWhitespace, after_field: str
) -> list[Any]:
    """``items`` (call arguments or parameters) with ``new`` appended in their comma style.

    ``opening`` is the whitespace after the opening parenthesis; ``after_field`` names the
    item's whitespace-before-closing-parenthesis field (``whitespace_after_arg``/``..._param``).
    """
    items = list(items)
    if not items:
        return [new]
    last = items[-1]
    if isinstance(last.comma, cst.Comma):  # trailing comma: one item per line
        closing = last.comma.whitespace_after
        between = items[-2].comma.whitespace_after if len(items) > 1 and isinstance(items[-2].comma, cst.Comma) else (
            opening
        )
        if isinstance(closing, cst.ParenthesizedWhitespace) and isinstance(between, cst.ParenthesizedWhitespace):
            # the last item keeps its comment; the new one closes the list
            items[-1] = last.with_changes(comma=last.comma.with_changes(
                whitespace_after=closing.with_changes(last_line=between.last_line, indent=between.indent)
            ))
            items.append(new.with_changes(comma=last.comma.with_changes(
                whitespace_after=closing.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
            )))
        else:
            items[-1] = last.with_changes(comma=cst.Comma(whitespace_after=between))
            items.append(new.with_changes(comma=last.comma))
        return items
    items[-1] = last.with_changes(
        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")), **{after_field: cst.SimpleWhitespace("")}
    )
    items.append(new.with_changes(**{after_field: getattr(last, after_field)}))
    return items


def add_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``name=value`` appended (or replacing an existing ``name=``), in the call's style."""
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    return call.with_changes(args=append_item(args, new, call.whitespace_before_args, "whitespace_after_arg"))


def target_names(target: cst.BaseExpression) -> set[str]:
    """The plain names an assignment target binds (``a`` and ``b`` in ``a, b = ...``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(target_names(e.value) for e in target.elements))
    return set()


def walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node`` and every node below it."""
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        out.append(n)
        todo.extend(n.children)
    return out


def list_arg(call: cst.Call, name: str, index: int) -> list[cst.BaseExpression]:
    """The elements of a call's list (or tuple) argument given by keyword ``name`` or at ``index``."""
    arg = keyword(call, name)
    if arg is None:
        args = positional(call)
        arg = args[index] if len(args) > index else None
    if arg is None or not isinstance(arg.value, (cst.List, cst.Tuple)):
        return []
    return [e.value for e in arg.value.elements]


def launch_writes(call: cst.Call) -> tuple[list[cst.BaseExpression], list[cst.BaseExpression]]:
    """(outputs, inputs) of a launch, ([dest], []) of a copy, else ([], [])."""
    if call_name(call) == "launch":
        return list_arg(call, "outputs", 3), list_arg(call, "inputs", 2)
    if call_name(call) == "copy" and positional(call):
        return [positional(call)[0].value], []
    return [], []


def method_call(stmt: cst.CSTNode, *methods: str) -> cst.Call | None:
    """The call when ``stmt`` is a line ``<x>.<method>(...)`` alone (any method when none is named)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and (not methods or call_name(call) in methods):
        return call
    return None
