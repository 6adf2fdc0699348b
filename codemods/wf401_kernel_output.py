"""WF401 / WF106 / WF107: a kernel that overwrites an element of its own array argument.

``a[i] *= b`` (WF401) and ``a[i] = f(a[i])`` (WF106) inside a taped kernel lose the
gradient. The rewrite gives the kernel a separate output (``a_out``), across files:

* kernel: the statement at the span becomes ``a_out[i] = a[i] * (b)`` (``a_out[i] = f(a[i])``),
  later reads of ``a[...]`` in the kernel read ``a_out[...]``, and ``a_out: <type of a>``
  is appended to the parameters;
* every launch site (any file): ``a_out = wp.empty_like(<arg>)`` before the launch,
  ``a_out`` appended to ``outputs`` (``outputs=[a_out]`` added when there is none: Warp
  binds ``inputs + outputs`` in order), and ``<arg> = a_out`` after the launch.

A store under an ``if`` (a clamp: ``if x[i] > c: x[i] = c``) is handled too: the
output is first initialised from the input (``x_out[i] = x[i]`` just before the ``if``)
and every store of the ``if`` goes to ``x_out``.

Finding data (all optional, inferred from the span when absent):
``kernel`` -- the kernel's name; ``param`` -- the overwritten array parameter; ``alias`` -- WF106 at a
launch passing one array as an input and as the output ``param``: only the launch is rewritten
(:mod:`codemods._launch_alias`).
The span must point at the overwriting statement in the kernel body. WF107 (an array field
of a ``@wp.struct`` parameter, ``s.q[i] = f(s.q[i])``): the output ``q_out`` gets the field's
type from the struct class (defined in the kernel's file), and each launch allocates
``q_out = wp.empty_like(<struct>.q)``, passes it, and rebinds ``<struct>`` to a new struct
holding ``q_out`` and the other fields unchanged (a launch records a struct by reference, so
rebinding the old struct's field would change what earlier launches differentiate).

Skipped with a reason when not mechanical: the write is in a loop, stores use different
indices, the parameter is written outside that statement or passed to a call, a launch
does not pass literal ``inputs``/``outputs`` lists, an argument is not rebindable (a call,
or a parameter of the enclosing function whose caller would not see the rebinding), the
program reads the argument's ``.grad`` (an optimizer step: after the rebinding it would read the
new output's gradient, which the backward clears), a graph capture runs the launch
(``warpfix.model.capture``), or the kernel is used other than as the kernel of a ``wp.launch``.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile

from codemods._cst import append_item, dotted, target_names
from codemods._kernel_output_launches import LaunchSites
from codemods._kernel_register import keep_in_register, register_refusal
from codemods._launch_alias import fresh_launch_output, stores_every_element
from codemods._resolve import Binding, DiskSources, Sources, binding_in
from warpfix.finding import Finding

_ATOMS = (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.Integer, cst.Float)
_BINARY = {
    cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide,
    cst.AddAssign: cst.Add,
    cst.SubtractAssign: cst.Subtract,
}


def is_kernel(func: cst.FunctionDef) -> bool:
    for dec in func.decorators:
        node = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        if (dotted(node) or "").split(".")[-1] == "kernel":
            return True
    return False


def _store_target(small: cst.CSTNode) -> cst.Subscript | None:
    if isinstance(small, cst.AugAssign):
        target = small.target
    elif isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
    else:
        return None
    return target if isinstance(target, cst.Subscript) else None


def _place(node: cst.BaseExpression) -> str | None:
    """``a`` for the array parameter ``a``, ``s.q`` for the field ``q`` of a struct parameter ``s``."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return f"{node.value.value}.{node.attr.value}"
    return None


def _writes_param(store: cst.CSTNode, place: str) -> bool:
    target = _store_target(store)
    return target is not None and _place(target.value) == place


class KernelOutput(LaunchSites):
    DESCRIPTION = "WF401/WF106: write a separate output array and rebind it at every launch site."
    RULES = ("WF401", "WF106", "WF107")
    DATA = {
        "kernel": "name of the kernel (default: the function around the line)",
        "param": "the overwritten array parameter (default: the store target at the line)",
        "alias": "WF106 at a launch: the argument passed as both an input and the output `param`",
    }
    CROSS_FILE = True

    @classmethod
    def paths_for(cls, finding: Finding, sources: dict[str, str]) -> list[str]:
        """The kernel's file, then every file that imports the kernel from it (see ``codemods._resolve``)."""
        kernel = finding.data.get("kernel") or _function_at(sources.get(finding.path, ""), finding.line)
        if not kernel or finding.data.get("alias"):
            return [finding.path]
        word = re.compile(rf"\b{re.escape(kernel)}\b")
        project = Sources(sources)
        return [finding.path, *(
            p for p, s in sources.items()
            if p != finding.path and word.search(s) and binding_in(p, finding.path, kernel, project)
        )]

    @classmethod
    def shared(cls, context: CodemodContext) -> dict[str, Any]:
        return context.scratch.setdefault("kernel_output", {})

    @classmethod
    def incomplete(cls, scratch: dict[str, Any]) -> str | None:
        state = scratch.get("kernel_output", {})
        if "kernel" in state and not state.get("launches"):
            return f"no launch of {state['kernel']} found: its signature cannot change"
        return None

    def plan(self, tree: cst.Module) -> None:
        if self.data.get("alias"):  # the kernel is right: its launch passes one array as input and output
            if not self.in_target_file():
                raise SkipFile("the launch alone is rewritten")
            fresh_launch_output(self, str(self.data["alias"]), str(self.data["param"] or "out"))
            return
        state = self.shared(self.context)
        self.extra = {}
        if self.in_target_file():
            self._plan_kernel()
            if state.get("folded"):
                return
            self.binding = Binding(names={self.kernel})
            state.update(kernel=self.kernel, param=self.param, index=self.index, extra=self.extra, field=self.field)
        elif state.get("folded"):
            raise SkipFile("the kernel alone was rewritten")
        elif "kernel" in state:
            self.kernel, self.param, self.index = state["kernel"], state["param"], state["index"]
            self.extra, self.field = state["extra"], state.get("field")
            self.binding = self._binding()
        elif self.data["kernel"] and self.data["param"] and self.file and os.path.isfile(self.file):
            # standalone runs (libcst.tool) visit files in any order: read the signature from disk
            self.kernel, self.param, self.field = self.data["kernel"], self.data["param"], None
            self.index = _param_index(self.file, self.kernel, self.param)
            self.binding = self._binding()
        else:
            raise SkipFile("the kernel file has not been rewritten first")
        self._plan_launches()

    def _binding(self) -> Binding:
        """How this (launching) file names the kernel of the finding's file; SkipFile when it does not."""
        sources = self.context.scratch.get("sources")
        project = Sources(sources) if sources is not None else DiskSources()
        filename = self.context.filename or ""
        binding = binding_in(filename, self.file or "", self.kernel, project) if self.file else Binding()
        if not binding:
            raise SkipFile(f"{filename} does not import {self.kernel} from {self.file}")
        return binding

    # -- the kernel ---------------------------------------------------------------------
    def _plan_kernel(self) -> None:
        small = self.on_line((cst.AugAssign, cst.Assign), lambda n: _store_target(n) is not None)
        target = _store_target(small)
        assert target is not None
        line = self.parent(small)
        func = self.enclosing(small, cst.FunctionDef)
        if func is None or not is_kernel(func):
            raise self.not_applicable("the store is not in a @wp.kernel body")
        place = _place(target.value)
        if place is None:
            raise self.not_applicable("the store target is neither an array parameter nor an array field of one")
        param, _, field = place.partition(".")
        self.field = field or None
        if self.data["param"] and self.data["param"] not in (param, place):
            raise self.not_applicable(f"the store writes {param}, not {self.data['param']}")
        if self.data["kernel"] and self.data["kernel"] != func.name.value:
            raise self.not_applicable(f"the store is in {func.name.value}, not {self.data['kernel']}")
        declared = {p.name.value: p for p in func.params.params}
        if param not in declared or declared[param].annotation is None:
            raise self.not_applicable(f"{param} is not an annotated kernel parameter")
        annotation = declared[param].annotation
        if self.field:  # WF107: the output gets the field's own array type, from the @wp.struct
            annotation = self._field_annotation(annotation, self.field)
        body = func.body
        top: cst.CSTNode = line
        while isinstance(body, cst.IndentedBlock) and self.parent(top) is not body:
            top = self.parent(top)
            if isinstance(top, cst.FunctionDef):
                break
        if not isinstance(body, cst.IndentedBlock) or top not in body.body or len(line.body) != 1:
            raise self.not_applicable(f"the store to {param} shares its line or is not in the kernel body")
        if isinstance(small, cst.AugAssign) and type(small.operator) not in _BINARY:
            raise self.not_applicable("unsupported in-place operator")
        for name in self.nodes(body, cst.Name):
            holder = self.parent(name)
            if name.value != param:
                continue
            if self.field and isinstance(holder, cst.Attribute) and holder.value is name:
                if holder.attr.value != self.field:
                    continue  # another field of the struct
                name, holder = holder, self.parent(holder)
            if not (isinstance(holder, cst.Subscript) and holder.value is name):
                raise self.not_applicable(f"{place} is passed on at line {self.pos(name).start.line}")
        stores = [s for s in self.nodes(body, (cst.Assign, cst.AugAssign)) if _writes_param(s, place)]
        if self._fold_into_store(small, stores, place):
            return
        outside = [s for s in stores if not any(a is top for a in self.ancestors(s)) and s is not small]
        if outside or (top is line and len(stores) != 1):
            why = (f"{place} is also written at line {self.pos(outside[0]).start.line}" if outside
                   else f"{place} is written more than once")
            self._keep_in_register(func, body, place, stores, why)
            return

        self.kernel, self.param = func.name.value, param
        self.index = [p.name.value for p in func.params.params].index(param)
        if not stores_every_element(self.code(func), [self.code(t) for s in stores if (t := _store_target(s))]):
            # ``u[s, i, j]`` (one slab of a history): the rest of a fresh output would hold other values, so
            # each launch site starts its output as a copy of the array (the copy is taped: its gradient flows)
            self.extra["partial"] = True
        out = self.fresh_name(f"{self.field or param}_out", func)
        out_name = cst.Name(out)
        if top is not line:
            self._conditional_stores(top, stores, small, place, out)
        first_end = min((self.pos(s).end.line, self.pos(s).end.column) for s in stores)
        for sub in self.nodes(body, cst.Subscript):
            start = (self.pos(sub).start.line, self.pos(sub).start.column)
            if _place(sub.value) == place and start > first_end:
                self.replace(sub.value, out_name)
        for store in stores:
            self._redirect(store, out_name)

        new_param = cst.Param(out_name, annotation=annotation)
        self.replace(func.params, lambda new: new.with_changes(
            params=append_item(new.params, new_param, func.whitespace_before_params, "whitespace_after_param")
        ))

    def _fold_into_store(self, small: cst.CSTNode, stores: list[cst.CSTNode], place: str) -> bool:
        """``a[i] = e`` right before ``a[i] *= b`` (the only two stores of ``a``): one store ``a[i] = e * (b)``.

        The same product of the same operands, in the same order, so the forward is bit for bit the same; nothing
        is updated in place any more and no launch changes. ``e`` must be a name, attribute, subscript or call
        (a bare literal could take another type than the array's); ``b`` must not read ``a``.
        """
        if not isinstance(small, cst.AugAssign) or type(small.operator) not in (cst.MultiplyAssign, cst.DivideAssign):
            return False
        if len(stores) != 2 or stores[1] is not small or not isinstance(stores[0], cst.Assign):
            return False
        first, line = stores[0], self.parent(small)
        block = self.parent(line)
        statements = list(getattr(block, "body", ()))
        if line not in statements or statements.index(line) == 0:
            return False
        before = statements[statements.index(line) - 1]
        if not (isinstance(before, cst.SimpleStatementLine) and len(before.body) == 1 and before.body[0] is first):
            return False
        if self.code(_store_target(first)) != self.code(_store_target(small)):
            return False
        if not isinstance(first.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            return False
        param = place.partition(".")[0]
        if any(n.value == param for n in self.nodes(small.value, cst.Name)):
            return False
        value = small.value
        if not isinstance(value, _ATOMS):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        product = cst.BinaryOperation(left=first.value, operator=_BINARY[type(small.operator)](), right=value)
        self.replace(first, lambda new: new.with_changes(value=product))
        self.remove(line)
        self.shared(self.context)["folded"] = True
        self.context.scratch["summary"] = (
            f"folded into the store before it: `{self.code(_store_target(first))} = {self.code(product)}` "
            "(the same product, computed once; no launch changes)"
        )
        return True

    def _keep_in_register(
        self, func: cst.FunctionDef, body: cst.IndentedBlock, place: str, stores: list[cst.CSTNode], why: str
    ) -> None:
        """A separate output cannot take several stores: the element lives in a local instead, or ``why``."""
        accesses = sorted((s for s in self.nodes(body, cst.Subscript) if _place(s.value) == place),
                          key=lambda s: (self.pos(s).start.line, self.pos(s).start.column))
        stores = sorted(stores, key=lambda s: (self.pos(s).start.line, self.pos(s).start.column))
        refused = register_refusal(self, body, place, stores, accesses)
        if refused is not None:
            raise self.not_applicable(f"{why}; nor can it be kept in a local: {refused}")
        self.context.scratch["summary"] = keep_in_register(self, func, body, place, stores, accesses)
        self.shared(self.context)["folded"] = True

    def _field_annotation(self, annotation: cst.Annotation, field: str) -> cst.Annotation:
        """The annotation of ``field`` in the ``@wp.struct`` class ``annotation`` names (defined in this file);
        the struct's name and field names go to ``extra`` for the launch sites."""
        struct = (dotted(annotation.annotation) or "").rpartition(".")[2]
        for cls in self.nodes(self.tree, cst.ClassDef):
            if cls.name.value != struct or not isinstance(cls.body, cst.IndentedBlock):
                continue
            fields = {
                small.target.value: small.annotation
                for stmt in cls.body.body if isinstance(stmt, cst.SimpleStatementLine)
                for small in stmt.body if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)
            }
            if field in fields:
                self.extra.update(struct=struct, fields=list(fields))
                return fields[field]
        raise self.not_applicable(f"the struct {struct} of field {field} is not defined in this file")

    def _struct_name(self) -> str:
        """How this (launching) file names the kernel file's struct class."""
        struct = self.extra["struct"]
        if self.in_target_file():
            return struct
        sources = self.context.scratch.get("sources")
        project = Sources(sources) if sources is not None else DiskSources()
        binding = binding_in(self.context.filename or "", self.file or "", struct, project)
        if binding.names:
            return sorted(binding.names)[0]
        if binding.modules:
            return f"{sorted(binding.modules)[0]}.{struct}"
        raise self.not_applicable(f"{self.context.filename} does not import the struct {struct}")

    def _conditional_stores(
        self, top: cst.CSTNode, stores: list[cst.CSTNode], small: cst.CSTNode, param: str, out: str
    ) -> None:
        """Stores under an ``if``: initialise the output from the input just before it."""
        if not isinstance(top, cst.If):
            raise self.not_applicable(f"the store to {param} is in a loop")
        if any(self.enclosing(s, (cst.For, cst.While)) for s in stores):
            raise self.not_applicable(f"the store to {param} is in a loop")
        if any(isinstance(s, cst.AugAssign) for s in stores) and len(stores) > 1:
            raise self.not_applicable(f"{param} is updated in place and written again")
        indices = {self.code(_store_target(s).slice[0]) if len(_store_target(s).slice) == 1 else None for s in stores}
        if len(indices) != 1 or None in indices:
            raise self.not_applicable(f"the stores to {param} use different indices")
        index = indices.pop()
        bound = {n for a in self.nodes(top, cst.AssignTarget) for n in target_names(a.target)}
        if bound & {n.value for n in self.nodes(_store_target(small).slice[0], cst.Name)}:
            raise self.not_applicable(f"the index of {param} is computed inside the if")
        self.insert_before(top, [self.statement(f"{out}[{index}] = {param}[{index}]\n")])

    def _redirect(self, store: cst.CSTNode, out_name: cst.Name) -> None:
        """``a[i] op= v`` -> ``a_out[i] = a[i] op (v)``; ``a[i] = v`` -> ``a_out[i] = v``."""
        target = _store_target(store)
        if isinstance(store, cst.AugAssign):
            value = store.value
            if not isinstance(value, _ATOMS):
                value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            self.replace(store, cst.Assign(
                targets=[cst.AssignTarget(target.with_changes(value=out_name))],
                value=cst.BinaryOperation(left=target, operator=_BINARY[type(store.operator)](), right=value),
                semicolon=store.semicolon,
            ))
        else:
            self.replace(target, lambda new: new.with_changes(value=out_name))

def _function_at(text: str, line: int) -> str | None:
    """The name of the innermost function whose body holds ``line``, None when none (or no parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    found = [
        n for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    return max(found, key=lambda n: n.lineno).name if found else None


def _param_index(path: str, kernel: str, param: str) -> int | None:
    """The position of ``param`` in the signature of ``kernel`` as defined in the file at ``path``."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            names = [a.arg for a in node.args.args]
            return names.index(param) if param in names else None
    return None
