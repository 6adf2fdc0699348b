"""WF103: a rebinding that makes two live buffers of one tape the same object.

Strategies, in order:

* ``states[0] = states[-1]`` -> ``states[0], states[-1] = states[-1], states[0]``: the
  buffers rotate, so the next window writes a buffer distinct from the one it starts from;
* the same rebinding while a tape records it (finding data ``recorded``: a class's frame loop
  ``self.v[0] = self.v[self.substeps]`` run inside one tape over several frames) keeps the alias
  and gives the source slot a fresh buffer: ``self.v[0] = self.v[S]`` then
  ``self.v[S] = wp.empty_like(self.v[S])``. A rotation would hand the last slot the buffer the
  tape read at the first frame, which the next frame then overwrites on the same tape;
* ``[make()] * n`` (or ``n * [make()]``, finding data ``repeat``) -> ``[make() for _ in range(n)]``:
  one fresh object per slot, built by the same call; and ``x = make()`` ... ``[x for _ in range(n)]``
  -> ``[make() for _ in range(n)]``, the binding removed (the rule marks it safe only when ``x`` is
  a warp allocation bound once and used nowhere else in its scope). Only a call is repeated this way: a list of
  one existing object (``[state] * n``) has no constructor to call again. Whether the call only
  allocates (so that calling it n times keeps every forward value) is the rule's judgement, given
  as the finding's fix safety.

Finding data: ``repeat`` (true for the list form), ``recorded`` (true when a tape records the rebinding). Otherwise the span's line holds the aliasing
assignment ``a = b`` where both sides are names, attributes or subscripts (no calls).
"""

from __future__ import annotations

import libcst as cst

from codemods._base import FindingCommand

_PLACES = (cst.Name, cst.Attribute, cst.Subscript)


def _is_alias(node: cst.Assign) -> bool:
    return (
        len(node.targets) == 1
        and isinstance(node.targets[0].target, _PLACES)
        and isinstance(node.value, _PLACES)
    )


def _true(value: object) -> bool:
    """A data flag given as a bool (findings) or as text (the command line)."""
    return value not in (None, False, "", "false", "False", "0")


def _repeated(node: cst.BinaryOperation) -> tuple[cst.List, cst.BaseExpression] | None:
    """(the one-element list, the count) of ``[x] * n`` / ``n * [x]``, else None."""
    if not isinstance(node.operator, cst.Multiply):
        return None
    for one, count in ((node.left, node.right), (node.right, node.left)):
        if isinstance(one, cst.List) and len(one.elements) == 1 and isinstance(one.elements[0], cst.Element):
            return one, count
    return None


class RotateBuffers(FindingCommand):
    DESCRIPTION = "WF103: swap the two buffers instead of aliasing one to the other."
    RULES = ("WF103",)
    DATA = {
        "repeat": "the finding is a list `[x] * n` of one object (true/false)",
        "recorded": "a tape records the rebinding (true/false): the source slot gets a fresh buffer",
    }

    def describe_missing(self) -> str:
        if self.data.get("repeat"):
            return "no `[x] * n` list"
        return "no `a = b` rebinding between array places"

    def plan(self, tree: cst.Module) -> None:
        if _true(self.data.get("repeat")):
            self.fresh_per_slot()
            return
        assign = self.on_line(cst.Assign, _is_alias)
        if any(self.nodes(assign, cst.Call)):
            raise self.not_applicable("the rebinding calls a function")
        target, value = self.code(assign.targets[0].target), self.code(assign.value)
        self.refuse_if_captured(assign.value, self.statement_of(assign), f"line {self.line}")
        if _true(self.data.get("recorded")):
            line = self.parent(assign)
            if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
                raise self.not_applicable("the rebinding is not a statement of its own")
            self.insert_after(line, [self.statement(f"{value} = {self.warp_alias()}.empty_like({value})\n")])
            self.context.scratch["summary"] = (
                f"fresh buffer: the tape records the rebinding, so `{value}` gets a new buffer after it "
                "(a rotation would hand it a buffer the tape already read)")
            return
        swap = self.statement(f"{target}, {value} = {value}, {target}\n")
        assert isinstance(swap, cst.SimpleStatementLine)
        self.replace(assign, swap.body[0].with_changes(semicolon=assign.semicolon))
        self.context.scratch["summary"] = f"rotate: `{target}` and `{value}` swapped instead of aliased"

    def fresh_per_slot(self) -> None:
        """``[make()] * n`` -> ``[make() for _ in range(n)]``; ``x = make()`` ... ``[x for _ in range(n)]``
        -> ``[make() for _ in range(n)]``."""
        comps = [c for c in self.nodes(self.tree, cst.ListComp) if self._covers(c) and isinstance(c.elt, cst.Name)]
        if comps:
            self._scratch_per_slot(comps[0])
            return
        node = self.on_line(cst.BinaryOperation, lambda n: _repeated(n) is not None)
        found = _repeated(node)
        assert found is not None
        one, count = found
        element = one.elements[0].value
        if not isinstance(element, cst.Call):
            raise self.not_applicable(
                f"`{self.code(element)}` is one existing object, not a constructor call that could build "
                "a fresh one per slot")
        var = self.fresh_name("_", node)
        make = self.code(element)
        n = cst.Module(body=()).code_for_node(count.with_changes(lpar=[], rpar=[]))
        self.replace(node, self.expression(f"[{make} for {var} in range({n})]"))
        self.context.scratch["summary"] = f"fresh per slot: `[{make}] * n` became one `{make}` call per slot"

    def _scratch_per_slot(self, comp: cst.ListComp) -> None:
        """The slot's one buffer allocated once per slot instead: the comprehension's element becomes the
        call that bound it, and that binding (used nowhere else: the rule's judgement) goes."""
        assert isinstance(comp.elt, cst.Name)
        name = comp.elt.value
        scope: cst.CSTNode = self.enclosing(comp, cst.FunctionDef) or self.tree
        bindings = [line for line in self.nodes(scope, cst.SimpleStatementLine)
                    if len(line.body) == 1 and isinstance(line.body[0], cst.Assign)
                    and len(line.body[0].targets) == 1 and isinstance(line.body[0].targets[0].target, cst.Name)
                    and line.body[0].targets[0].target.value == name]
        if len(bindings) != 1 or not isinstance(bindings[0].body[0].value, cst.Call):  # type: ignore[union-attr]
            raise self.not_applicable(f"`{name}` is not bound once, by a call, in the comprehension's scope")
        make = bindings[0].body[0].value  # type: ignore[union-attr]
        self.replace(comp.elt, make)
        self.remove(bindings[0])
        self.context.scratch["summary"] = (
            f"fresh per slot: `[{name} for ...]` became one `{self.code(make)}` per slot (`{name}` was used only there)")
