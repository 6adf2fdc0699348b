"""WF703 (unsafe): a straight-through estimator for a piecewise-constant op feeding the loss.

``wp.round(e)`` (also ``floor``, ``ceil``, ``trunc``, ``sign``) has an exactly-zero
gradient. The rewrite calls ``ste_round(e)`` instead, a ``@wp.func`` with the same
forward value whose ``@wp.func_grad`` passes the incoming adjoint straight through:

    @wp.func
    def ste_round(x: float):
        return wp.round(x)


    @wp.func_grad(ste_round)
    def adj_ste_round(x: float, adj_ret: float):
        wp.adjoint[x] += adj_ret

The helpers go just before the kernel (once per module and op). This changes what is
optimised -- a modelling decision -- hence unsafe. Scalars (``float``) only.

Finding data: none. The span points at the piecewise-constant call; int casts and
comparisons are skipped.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name

OPS = ("round", "floor", "ceil", "trunc", "sign")


class StraightThrough(FindingCommand):
    DESCRIPTION = "WF703: replace a piecewise-constant op by a straight-through estimator (unsafe)."
    RULES = ("WF703",)

    def describe_missing(self) -> str:
        return f"no `wp.{{{','.join(OPS)}}}(x)` call (int casts and comparisons have no mechanical estimator)"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(
            cst.Call, lambda c: isinstance(c.func, cst.Attribute) and call_name(c) in OPS and len(c.args) == 1
        )
        op = call_name(call)
        alias = self.code(call.func.value)
        helper = f"ste_{op}"
        existing = {d.name.value for d in tree.body if isinstance(d, cst.FunctionDef)}
        if helper not in existing:
            if helper in {n.value for n in self.nodes(tree, cst.Name)}:
                raise self.not_applicable(f"the name {helper} is taken")
            anchor = next((a for a in self.ancestors(call) if isinstance(a, cst.FunctionDef)), None)
            while anchor is not None and not isinstance(self.parent(anchor), cst.Module):
                anchor = self.enclosing(anchor, cst.FunctionDef)
            if anchor is None:
                raise self.not_applicable("the op is not inside a function")
            indent = tree.default_indent
            forward = self.statement(f"@{alias}.func\ndef {helper}(x: float):\n{indent}return {alias}.{op}(x)\n")
            backward = self.statement(
                f"@{alias}.func_grad({helper})\ndef adj_{helper}(x: float, adj_ret: float):\n"
                f"{indent}{alias}.adjoint[x] += adj_ret\n"
            )
            self.insert_definitions(anchor, [forward, backward])
        self.replace(call, lambda new: new.with_changes(func=cst.Name(helper)))
