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
The span's line holds the ``slot = wp.atomic_add(...)`` statement. Skipped when the
counter is not a kernel parameter, the increment uses kernel locals besides the counter,
the kernel has no scalar ``wp.tid()``, or a launch has a multi-dimensional ``dim``.
"""

from __future__ import annotations

import libcst as cst

from codemods._base import append_item, call_name, keyword, positional
from codemods.wf401_kernel_output import KernelOutput, is_kernel


def _increment(node: cst.Assign) -> bool:
    return (
        len(node.targets) == 1
        and isinstance(node.targets[0].target, cst.Name)
        and call_name(node.value) in ("atomic_add", "atomic_sub")
        and bool(node.value.args)
    )


class ReversibleIncrement(KernelOutput):
    DESCRIPTION = "WF803: store each thread's atomic slot in forward and read it back in replay."
    RULES = ("WF803",)
    DATA = {"kernel": "name of the kernel", "counter": "the counter parameter", "tid": "the thread index variable"}

    def _plan_kernel(self) -> None:
        assign = self.on_line(cst.Assign, _increment)
        func = self.enclosing(assign, cst.FunctionDef)
        if func is None or not is_kernel(func):
            raise self.not_applicable("the increment is not in a @wp.kernel body")
        call = assign.value
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
        self.replace(call, self.expression(f"{helper}({counter.value}, {slots}, {tid})"))
        new_param = cst.Param(cst.Name(slots), annotation=cst.Annotation(annotation))
        self.replace(func.params, lambda new: new.with_changes(
            params=append_item(new.params, new_param, func.whitespace_before_params, "whitespace_after_param")
        ))
        self.kernel, self.param, self.index = func.name.value, counter.value, None
        self.extra = {"dtype": self.code(dtype.value), "slots": "slots"}

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
