"""WF202 (unsafe): remove ``enable_backward=False`` for a taped kernel.

Finding data: none. The span's line holds one of: a kernel decorator
``@wp.kernel(enable_backward=False)`` (the option is removed; ``@wp.kernel`` when it was
the only one), ``wp.set_module_options({"enable_backward": False})`` (the entry is
removed; the statement too when it held nothing else), or
``wp.config.enable_backward = False`` (the statement is removed).
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import is_warp_call, keyword, remove_keyword


def _is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _option_key(element: cst.BaseDictElement) -> bool:
    return (
        isinstance(element, cst.DictElement)
        and isinstance(element.key, cst.SimpleString)
        and element.key.evaluated_value == "enable_backward"
        and _is_false(element.value)
    )


def _carries_option(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Decorator):
        dec = node.decorator
        return isinstance(dec, cst.Call) and (kw := keyword(dec, "enable_backward")) is not None and _is_false(kw.value)
    if isinstance(node, cst.Call):
        return is_warp_call(node, "set_module_options") and any(
            isinstance(a.value, cst.Dict) and any(_option_key(e) for e in a.value.elements) for a in node.args
        )
    if isinstance(node, cst.Assign):
        return (
            len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Attribute)
            and node.targets[0].target.attr.value == "enable_backward"
            and _is_false(node.value)
        )
    return False


class EnableBackward(FindingCommand):
    DESCRIPTION = "WF202: remove enable_backward=False for a kernel launched on a tape."
    RULES = ("WF202",)

    def describe_missing(self) -> str:
        return "no `enable_backward=False` here"

    def plan(self, tree: cst.Module) -> None:
        node = self.on_line((cst.Decorator, cst.Call, cst.Assign), _carries_option)
        if isinstance(node, cst.Assign):
            self.remove_small(node)
        elif isinstance(node, cst.Decorator):
            self.replace(node, self._decorator)
        else:
            self._module_options(node)

    @staticmethod
    def _decorator(dec: cst.Decorator) -> cst.Decorator:
        call = remove_keyword(dec.decorator, "enable_backward")
        return dec.with_changes(decorator=call.func if not call.args else call)

    def _module_options(self, call: cst.Call) -> None:
        arg = next(a for a in call.args if isinstance(a.value, cst.Dict))
        elements = [e for e in arg.value.elements if not _option_key(e)]
        stmt = self.statement_of(call)
        alone = isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and (
            isinstance(stmt.body[0], cst.Expr) and stmt.body[0].value is call
        )
        if not elements and len(call.args) == 1 and alone:
            self.remove(stmt)
            return
        if elements:
            elements[-1] = elements[-1].with_changes(comma=arg.value.elements[-1].comma)

        def rewrite(new: cst.Call) -> cst.Call:
            args = [a.with_changes(value=a.value.with_changes(elements=elements)) if isinstance(a.value, cst.Dict) else a
                    for a in new.args]
            return new.with_changes(args=args)

        self.replace(call, rewrite)
