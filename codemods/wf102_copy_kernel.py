"""WF102 (Warp < 1.17): a recorded copy whose source is read again later on the tape.

Old Warp's copy adjoint overwrote the source's gradient instead of accumulating into it.
The rewrite replaces the copy by a launch of a trivial copy kernel, whose adjoint
accumulates like any kernel's:

    @wp.kernel
    def copy_array(src: wp.array(dtype=Any), dst: wp.array(dtype=Any)):
        i = wp.tid()
        dst[i] = src[i]

``wp.copy(dst, src)`` / ``dst.assign(src)`` -> ``wp.launch(copy_array, dim=src.shape,
inputs=[src], outputs=[dst])``; ``y = wp.clone(src)`` -> ``y = wp.empty_like(src)`` and the
launch after it. The kernel goes before the module's first definition; it is generic over the dtype (``typing.Any`` is imported) and
indexes one dimension: one-dimensional arrays only.

Finding data (optional, checked when given): ``src``, ``dst``. The span's line holds the
copy statement.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name, is_warp_call, positional
from codemods._imports import need_typing_any
from codemods.wf101_copy_rebind import _copy_operands

KERNEL = "copy_array"


def _is_copy(call: cst.Call) -> bool:
    return _copy_operands(call) is not None or (is_warp_call(call, "clone") and len(positional(call)) == 1)


class CopyKernel(FindingCommand):
    DESCRIPTION = "WF102: replace a recorded copy by a copy kernel (Warp < 1.17 copy adjoints overwrite)."
    RULES = ("WF102",)
    DATA = {"dst": "the copy's destination as written", "src": "the copy's source as written"}

    def describe_missing(self) -> str:
        return "no `wp.copy(dst, src)` / `dst.assign(src)` / `y = wp.clone(src)` statement"

    def plan(self, tree: cst.Module) -> None:
        call = self.on_line(cst.Call, _is_copy)
        stmt = self.parent(self.parent(call))
        owner = self.parent(call)
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            raise self.not_applicable("the copy is not a statement of its own")
        alias = self.code(call.func.value) if isinstance(call.func, cst.Attribute) and call_name(call) != "assign" \
            else self.warp_alias()
        if call_name(call) == "clone":
            if not (isinstance(owner, cst.Assign) and len(owner.targets) == 1):
                raise self.not_applicable("the clone is not assigned to one name")
            dst, src = owner.targets[0].target, call.args[0].value
        elif isinstance(owner, cst.Expr):
            dst, src = _copy_operands(call)
        else:
            raise self.not_applicable("the copy is not a statement of its own")
        for key, node in (("dst", dst), ("src", src)):
            wanted = self.data[key]
            if wanted and "".join(wanted.split()) != "".join(self.code(node).split()):
                raise self.not_applicable(f"the copy's {key} is {self.code(node)}, not {wanted}")
        s, d = self.code(src), self.code(dst)
        launch = self.statement(f"{alias}.launch({KERNEL}, dim={s}.shape, inputs=[{s}], outputs=[{d}])\n")
        if call_name(call) == "clone":
            self.replace(call, self.expression(f"{alias}.empty_like({s})"))
            self.insert_after(stmt, [launch])
        else:
            self.replace(stmt, launch.with_changes(leading_lines=stmt.leading_lines,
                                                   trailing_whitespace=stmt.trailing_whitespace))
        self._define_kernel(stmt, alias)

    def _define_kernel(self, stmt: cst.CSTNode, alias: str) -> None:
        if any(isinstance(d, cst.FunctionDef) and d.name.value == KERNEL for d in self.tree.body):
            return
        if KERNEL in {n.value for n in self.nodes(self.tree, cst.Name)}:
            raise self.not_applicable(f"the name {KERNEL} is taken")
        top = stmt
        while not isinstance(self.parent(top), cst.Module):
            top = self.parent(top)
        # beside the other definitions: before the first module-level def, else before the copy
        top = next((d for d in self.tree.body if isinstance(d, (cst.FunctionDef, cst.ClassDef))), top)
        indent = self.tree.default_indent
        kernel = self.statement(
            f"@{alias}.kernel\ndef {KERNEL}(src: {alias}.array(dtype=Any), dst: {alias}.array(dtype=Any)):\n"
            f"{indent}i = {alias}.tid()\n{indent}dst[i] = src[i]\n"
        )
        self.insert_definitions(top, [kernel])
        need_typing_any(self)
