"""The launch sites of WF401/WF106/WF107's separate kernel output (:mod:`codemods.wf401_kernel_output`):
each launch of the rewritten kernel, in any file, allocates the new output before the launch, passes it
as the kernel's new last argument and rebinds the overwritten argument to it after (a struct field: a
new struct holding it). ``launch_parts`` and ``append_output`` serve the other launch rewrites too."""

from __future__ import annotations

import re
from typing import Any

import libcst as cst
from libcst.codemod import SkipFile

from codemods._base import FindingCommand
from codemods._cst import add_keyword, call_name, dotted, keyword, positional
from codemods._resolve import Binding


def _launch_kernel(call: cst.Call) -> cst.BaseExpression | None:
    if call_name(call) != "launch":
        return None
    kw = keyword(call, "kernel")
    if kw is not None:
        return kw.value
    args = positional(call)
    return args[0].value if args else None


def _append_element(lst: cst.List | cst.Tuple, value: cst.BaseExpression) -> cst.List | cst.Tuple:
    elements = list(lst.elements)
    if not elements:
        return lst.with_changes(elements=[cst.Element(value)])
    last = elements[-1]
    if isinstance(last.comma, cst.Comma):
        between = elements[-2].comma if len(elements) > 1 and isinstance(elements[-2].comma, cst.Comma) else None
        elements[-1] = last.with_changes(comma=between or cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elements.append(cst.Element(value, comma=last.comma))
    else:
        elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elements.append(cst.Element(value))
    return lst.with_changes(elements=elements)


class LaunchSites(FindingCommand):
    """The launch half of the kernel-output rewrite; the kernel half (the subclass) sets these attributes
    and names the struct class of a WF107 field (``_struct_name``)."""

    kernel: str
    param: str
    index: int | None  # the overwritten parameter's position in the kernel's signature
    binding: Binding  # how this file names the kernel
    #: what the kernel pass tells the launch passes (in other files too), beyond kernel and parameter
    extra: dict[str, Any]
    #: WF107: the overwritten array is this field of the struct parameter ``param``
    field: str | None = None

    def _struct_name(self) -> str:
        raise NotImplementedError

    def _plan_launches(self) -> None:
        count = 0
        for name in self.nodes(self.tree, cst.Name):
            holder = self.parent(name)
            is_attribute = isinstance(holder, cst.Attribute) and holder.attr is name
            if is_attribute:
                # `module.kernel` through an import of the kernel's module; any other object's
                # attribute of that name (`wp.kernel`, another module's kernel) is no use of it
                if name.value != self.kernel or dotted(holder.value) not in self.binding.modules:
                    continue
            elif name.value not in self.binding.names:
                continue
            if isinstance(holder, cst.Arg) and holder.keyword is name:
                continue  # `kernel=` keyword
            if isinstance(holder, (cst.Param, cst.FunctionDef, cst.ImportAlias, cst.ImportFrom, cst.AsName, cst.ClassDef)):
                continue  # a definition or import of the name
            use = holder if is_attribute else name
            arg = self.parent(use)
            call = self.parent(arg) if isinstance(arg, cst.Arg) else None
            if isinstance(call, cst.Call) and _launch_kernel(call) is use:
                func = self.enclosing(call, cst.FunctionDef)
                if not is_attribute and func is not None and name.value in {p.name.value for p in func.params.params}:
                    raise self.not_applicable(f"{func.name.value}() launches a parameter named {name.value}")
                self._plan_launch(call)
                count += 1
            else:
                raise self.not_applicable(
                    f"{self.kernel} is used at line {self.pos(name).start.line} other than as a launched kernel"
                )
        if count == 0:
            if self.in_target_file():
                return
            raise SkipFile("no launch of the kernel here")
        self.shared(self.context)["launches"] = self.shared(self.context).get("launches", 0) + count

    def _bound_list(self, call: cst.Call, slot: str, index: int) -> cst.Arg | None:
        kw = keyword(call, slot)
        if kw is not None:
            return kw
        args = positional(call)
        return args[index] if len(args) > index else None

    def launch_parts(self, call: cst.Call) -> tuple[cst.SimpleStatementLine, cst.Arg | None, list[cst.BaseExpression]]:
        """(the launch's statement, its ``outputs`` argument, the arguments bound in kernel order)."""
        where = f"the launch at line {self.pos(call).start.line}"
        line = self.parent(self.parent(call))
        if not (isinstance(self.parent(call), cst.Expr) and isinstance(line, cst.SimpleStatementLine)
                and len(line.body) == 1):
            raise self.not_applicable(f"{where} is not a statement of its own")
        inputs, outputs = self._bound_list(call, "inputs", 2), self._bound_list(call, "outputs", 3)
        bound: list[cst.BaseExpression] = []
        for holder in (inputs, outputs):
            if holder is None:
                continue
            if not isinstance(holder.value, (cst.List, cst.Tuple)) or any(
                isinstance(e, cst.StarredElement) for e in holder.value.elements
            ):
                raise self.not_applicable(f"{where} does not pass literal inputs/outputs lists")
            bound.extend(e.value for e in holder.value.elements)
        return line, outputs, bound

    def append_output(self, call: cst.Call, outputs: cst.Arg | None, name: str) -> None:
        """Pass ``name`` as the launch's last argument (the kernel's new last parameter)."""
        if outputs is not None:
            self.replace(outputs.value, lambda new: _append_element(new, cst.Name(name)))
        else:
            new_list = cst.List([cst.Element(cst.Name(name))])
            self.replace(call, lambda new: add_keyword(new, "outputs", new_list))

    def _plan_launch(self, call: cst.Call) -> None:
        line, outputs, bound = self.launch_parts(call)
        where = f"the launch at line {self.pos(call).start.line}"
        if self.index is None:
            raise self.not_applicable(f"{where}: kernel {self.kernel} has no parameter {self.param}")
        if self.index >= len(bound):
            raise self.not_applicable(f"{where} binds fewer arguments than the kernel has")
        arg = bound[self.index]
        self.check_rebindable(arg, line, where, through_return=True)
        self._refuse_a_read_gradient(arg, line, where)

        alias = self.code(call.func.value) if isinstance(call.func, cst.Attribute) else "wp"
        scope = self.enclosing(call, cst.FunctionDef) or self.tree
        fresh = self.fresh_name(f"{self.field or self.param}_out", scope)
        text = self.code(arg)
        # a kernel that stores only some elements (one slab) starts its output as a copy of the array
        make = "clone" if self.extra.get("partial") else "empty_like"
        if self.field:
            # a launch records a struct by reference: rebinding its field would change what the earlier
            # launches' backward reads. A new struct takes the new array and the other fields as they are.
            self.insert_before(line, [self.statement(f"{fresh} = {alias}.{make}({text}.{self.field})\n")])
            struct = self.fresh_name(f"{_stem(text)}_new", scope)
            rebuild = [self.statement(f"{struct} = {self._struct_name()}()\n")]
            rebuild += [
                self.statement(f"{struct}.{f} = {fresh if f == self.field else f'{text}.{f}'}\n")
                for f in self.extra["fields"]
            ]
            self.insert_after(line, [*rebuild, self.statement(f"{text} = {struct}\n")])
        else:
            self.insert_before(line, [self.statement(f"{fresh} = {alias}.{make}({text})\n")])
            self.insert_after(line, [self.statement(f"{text} = {fresh}\n")])
        self.append_output(call, outputs, fresh)

    def _refuse_a_read_gradient(self, arg: cst.BaseExpression, line: cst.BaseStatement, where: str) -> None:
        """Refuse when the program reads ``<arg>.grad`` (an optimizer step on the array the kernel
        updates in place): after the rebinding that is the gradient of the new output, which Warp
        clears once the kernel's backward has used it, not the gradient of the array the launch
        read. A local name is looked for in its function, an attribute or element in the file."""
        text = self.code(arg)
        func = self.enclosing(line, cst.FunctionDef) if isinstance(arg, cst.Name) else None
        scope = self.code(func) if func is not None else self.tree.code
        if re.search(rf"(?<![\w.]){re.escape(text)}\s*\.\s*grad\b", scope):
            raise self.not_applicable(
                f"{where}: the program reads {text}.grad; after rebinding {text} to the new output that "
                "would be the output's gradient, which the backward clears, not the gradient of the array "
                "the launch reads"
            )


def _stem(place: str) -> str:
    """A name derived from a place: ``nxt`` for ``nxt``, ``state`` for ``self.state``, ``s`` for ``s[0]``."""
    words = [w for w in place.replace("[", ".").replace("]", ".").split(".") if w.isidentifier() and w != "self"]
    return words[-1] if words else "value"
