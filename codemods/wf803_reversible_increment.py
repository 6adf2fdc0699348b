"""WF803: an atomic counter used as an index in a taped kernel, replayed in backward.

``slot = wp.atomic_add(counter, 0, 1)`` runs again when the tape replays the kernel, so the
adjoints scatter to the wrong slots. The rewrite applies Warp's reversible-increment
pattern, across files:

* a ``@wp.func`` ``reserve_slot(counter, slots, tid)`` does the increment and stores the
  slot per thread; its ``@wp.func_replay`` reads the stored slot back instead;
* the kernel gets a ``slots`` array parameter and calls ``reserve_slot(counter, slots, tid)``;
* every launch allocates ``slots = wp.zeros(<dim>, dtype=<counter dtype>)`` and passes it.

Finding data (optional): ``kernel``; ``counter`` -- the counter parameter; ``tid`` -- the
kernel's thread index variable (default: the ``x = wp.tid()`` of the kernel).
The span's line holds the ``slot = wp.atomic_add(...)`` statement, or (``via``: the name of a
``@wp.func`` that only returns such an atomic) ``slot = reserve(counter)``: the kernel's call
is replaced the same way, and the func is left as it is. Skipped when the
counter is not a kernel parameter, the increment uses kernel locals besides the counter,
the kernel has no scalar ``wp.tid()``, or a launch has a multi-dimensional ``dim``.
"""

from __future__ import annotations

import libcst as cst

from codemods._cst import append_item, call_name, keyword, positional
from codemods.wf401_kernel_output import KernelOutput, is_kernel


def _increment(node: cst.Assign) -> bool:
    return (
        len(node.targets) == 1
        and isinstance(node.targets[0].target, cst.Name)
        and call_name(node.value) in ("atomic_add", "atomic_sub")
        and bool(node.value.args)
    )


class _Substitute(cst.CSTTransformer):
    """Replace parameter names by argument expressions."""

    def __init__(self, mapping: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.mapping = mapping

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self.mapping.get(original_node.value, updated_node)


class ReversibleIncrement(KernelOutput):
    DESCRIPTION = "WF803: store each thread's atomic slot in forward and read it back in replay."
    RULES = ("WF803",)
    DATA = {
        "kernel": "name of the kernel",
        "counter": "the counter parameter",
        "tid": "the thread index variable",
        "via": "the @wp.func whose `return wp.atomic_add(...)` the kernel calls for its slot",
    }

    def _plan_kernel(self) -> None:
        assign = self.on_line(cst.Assign, lambda n: _increment(n) or self._via_call(n) is not None)
        func = self.enclosing(assign, cst.FunctionDef)
        if func is None or not is_kernel(func):
            raise self.not_applicable("the increment is not in a @wp.kernel body")
        original = assign.value
        call = self._via_call(assign) or original  # through a @wp.func: its atomic, in the kernel's terms
        counter = call.args[0].value
        declared = {p.name.value: p for p in func.params.params}
        if not isinstance(counter, cst.Name) or counter.value not in declared or (
            declared[counter.value].annotation is None
        ):
            raise self.not_applicable("the counter is not an annotated kernel parameter")
        if self.data["counter"] and self.data["counter"] != counter.value:
            raise self.not_applicable(f"the counter is {counter.value}, not {self.data['counter']}")
        locals_ = {p for p in declared} | {
            t.target.value for a in self.nodes(func.body, cst.Assign) for t in a.targets if isinstance(t.target, cst.Name)
        }
        used = {n.value for a in call.args[1:] for n in self.nodes(a, cst.Name)}
        if used & locals_:
            raise self.not_applicable(f"the increment uses kernel values {', '.join(sorted(used & locals_))}")
        tid = self.data["tid"] or next(
            (
                a.targets[0].target.value
                for a in self.nodes(func.body, cst.Assign)
                if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and call_name(a.value) == "tid"
                and not a.value.args
            ),
            None,
        )
        if tid is None:
            raise self.not_applicable("the kernel has no `tid = wp.tid()`")
        annotation = declared[counter.value].annotation.annotation
        dtype = keyword(annotation, "dtype") if isinstance(annotation, cst.Call) else None
        if dtype is None:
            raise self.not_applicable("the counter's dtype is not spelled out in its annotation")

        alias = self.warp_alias()
        helper = self.fresh_name("reserve_slot")
        slots = self.fresh_name("slots", func)
        ann = self.code(annotation)
        slot = assign.targets[0].target.value
        params = f"{counter.value}: {ann}, {slots}: {ann}, {tid}: int"
        indent = self.tree.default_indent
        forward = self.statement(
            f"@{alias}.func\ndef {helper}({params}):\n{indent}{slot} = {self.code(call)}\n"
            f"{indent}{slots}[{tid}] = {slot}\n{indent}return {slot}\n"
        )
        replay = self.statement(
            f"@{alias}.func_replay({helper})\ndef replay_{helper}({params}):\n{indent}return {slots}[{tid}]\n"
        )
        self.insert_definitions(func, [forward, replay])
        self.replace(original, self.expression(f"{helper}({counter.value}, {slots}, {tid})"))
        new_param = cst.Param(cst.Name(slots), annotation=cst.Annotation(annotation))
        self.replace(func.params, lambda new: new.with_changes(
            params=append_item(new.params, new_param, func.whitespace_before_params, "whitespace_after_param")
        ))
        self.kernel, self.param, self.index = func.name.value, counter.value, None
        self.extra = {"dtype": self.code(dtype.value), "slots": "slots"}

    def _via_call(self, node: cst.Assign) -> cst.Call | None:
        """For ``slot = reserve(counter)`` with ``data["via"]`` naming a module-level ``@wp.func`` whose body
        is only ``return wp.atomic_add(c, 0, 1)`` (or ``s = wp.atomic_add(...)``; ``return s``): that atomic
        with the func's parameters replaced by the call's arguments."""
        via = self.data.get("via")
        if not via or _increment(node) or len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return None
        call = node.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == via):
            return None
        defs = [d for d in self.tree.body if isinstance(d, cst.FunctionDef) and d.name.value == via]
        if len(defs) != 1 or not isinstance(defs[0].body, cst.IndentedBlock):
            return None
        body = [s for s in defs[0].body.body if not (
            isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Expr)
            and isinstance(s.body[0].value, cst.SimpleString))]
        smalls = [s.body[0] for s in body if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1]
        if len(smalls) != len(body):
            return None
        atomic = None
        if len(smalls) == 1 and isinstance(smalls[0], cst.Return):
            atomic = smalls[0].value
        elif len(smalls) == 2 and isinstance(smalls[0], cst.Assign) and isinstance(smalls[1], cst.Return) and (
            isinstance(smalls[1].value, cst.Name) and len(smalls[0].targets) == 1
            and self.code(smalls[0].targets[0].target) == smalls[1].value.value
        ):
            atomic = smalls[0].value
        if not (isinstance(atomic, cst.Call) and call_name(atomic) in ("atomic_add", "atomic_sub") and atomic.args):
            return None
        params = [p.name.value for p in defs[0].params.params]
        if any(a.keyword is not None or a.star for a in call.args) or len(call.args) != len(params):
            return None
        mapping = {p: a.value for p, a in zip(params, call.args, strict=True)}
        return atomic.visit(_Substitute(mapping))

    def _plan_launch(self, call: cst.Call) -> None:
        line, outputs, _bound = self.launch_parts(call)
        dim = keyword(call, "dim")
        dim_value = dim.value if dim is not None else (positional(call)[1].value if len(positional(call)) > 1 else None)
        if dim_value is None or isinstance(dim_value, (cst.Tuple, cst.List)):
            raise self.not_applicable(f"the launch at line {self.pos(call).start.line} is not one-dimensional")
        alias = self.code(call.func.value) if isinstance(call.func, cst.Attribute) else "wp"
        name = self.fresh_name(self.extra["slots"], self.enclosing(call, cst.FunctionDef) or self.tree)
        self.insert_before(
            line, [self.statement(f"{name} = {alias}.zeros({self.code(dim_value)}, dtype={self.extra['dtype']})\n")]
        )
        self.append_output(call, outputs, name)
