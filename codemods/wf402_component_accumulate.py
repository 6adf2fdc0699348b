"""WF402: a component of a local vector/matrix/quaternion assigned with ``=`` again.

Only ``+=``/``-=`` after the first write keep gradients. Two rewrites keep every forward
value bit for bit, tried in this order:

* **accumulate**: ``m[i, j] = m[i, j] + e`` (also ``e + m[i, j]``, ``m[i, j] - e``) becomes
  ``m[i, j] += e`` (``-= e``) -- the same single addition, and the form Warp's documentation
  prescribes, inside loops too;
* **rebuild**: any other ``v[k] = e`` / ``v.x = e`` (``k`` an integer literal, ``m[r, c]`` two)
  rebuilds the value with its constructor, ``v = wp.vec3(v[0], e, v[2])``: every other
  component is copied exactly, and the adjoint of the new component flows to ``e`` only. The
  constructor comes from the value's binding in the function (``v = wp.vec3(...)``,
  ``v: wp.mat22 = ...``) or the parameter's annotation; it must name the size (``vec3``,
  ``mat33d``, ``quat``...). Not inside a loop (a value rebound in a dynamic loop is a loop-carried
  variable whose backward Warp does not replay).

``v[k] += e - v[k]`` is never written: ``v + (e - v)`` is not ``e`` in floating point.
Finding data (optional, checked when given): ``target`` -- the component as written
(``v[0]``). The span's line holds the later assignment. The unsafe alternative (the
``wp.config.enable_vector_component_overwrites`` flag) is not a codemod.
"""

from __future__ import annotations

import re

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import dotted

_ATTRS = ("x", "y", "z", "w")
#: constructor name (after the module alias) -> (rows, columns); vectors and quaternions have one row
_SIZED = re.compile(r"^(?:vec(?P<n>[234])|mat(?P<r>[234])(?P<c>[234])|(?P<q>quat))(?:[fdh]|ui|ub|us|ul|[ibsl])?$")


def _component_store(node: cst.Assign) -> bool:
    """``v[c] = ...`` or ``v.x = ...`` (``x``/``y``/``z``/``w``) on a local name."""
    if len(node.targets) != 1:
        return False
    target = node.targets[0].target
    if isinstance(target, cst.Attribute) and target.attr.value not in _ATTRS:
        return False
    return isinstance(target, (cst.Subscript, cst.Attribute)) and isinstance(target.value, cst.Name)


def _shape(ctor: str) -> tuple[int, int] | None:
    match = _SIZED.match(ctor.rpartition(".")[2])
    if match is None:
        return None
    if match["q"]:
        return (1, 4)
    if match["n"]:
        return (1, int(match["n"]))
    return (int(match["r"]), int(match["c"]))


def _flat(text: str) -> str:
    return "".join(text.split())


class ComponentAccumulate(FindingCommand):
    DESCRIPTION = "WF402: turn a repeated component assignment into an accumulation or a constructor rebuild."
    RULES = ("WF402",)
    DATA = {"target": "the component as written, e.g. v[0] or v.x"}

    def describe_missing(self) -> str:
        return "no `v[c] = ...` / `v.x = ...` component assignment"

    def plan(self, tree: cst.Module) -> None:
        assign = self.on_line(cst.Assign, _component_store)
        target = assign.targets[0].target
        wanted = self.data["target"]
        if wanted and _flat(wanted) != _flat(self.code(target)):
            raise self.not_applicable(f"the assignment writes {self.code(target)}, not {wanted}")
        if not self._accumulate(assign, target):
            self._rebuild(assign, target)

    # -- m[i, j] = m[i, j] + e  ->  m[i, j] += e ----------------------------------------------
    def _accumulate(self, assign: cst.Assign, target: cst.BaseExpression) -> bool:
        value = assign.value
        if not isinstance(value, cst.BinaryOperation) or value.lpar:
            return False
        same = _flat(self.code(target))
        if _flat(self.code(value.left)) == same and isinstance(value.operator, (cst.Add, cst.Subtract)):
            rest = value.right
        elif _flat(self.code(value.right)) == same and isinstance(value.operator, cst.Add):
            rest = value.left  # `e + m` is `m + e` bit for bit: IEEE addition commutes
        else:
            return False
        operator = cst.AddAssign if isinstance(value.operator, cst.Add) else cst.SubtractAssign
        self.replace(assign, cst.AugAssign(
            target=target,
            operator=operator(
                whitespace_before=assign.targets[0].whitespace_before_equal,
                whitespace_after=assign.targets[0].whitespace_after_equal,
            ),
            value=rest.with_changes(lpar=[], rpar=[]) if isinstance(rest, cst.BinaryOperation) else rest,
            semicolon=assign.semicolon,
        ))
        return True

    # -- v[k] = e  ->  v = wp.vec3(v[0], e, v[2]) ----------------------------------------------
    def _rebuild(self, assign: cst.Assign, target: cst.BaseExpression) -> None:
        if self.enclosing(assign, (cst.For, cst.While)) is not None:
            raise self.not_applicable(
                "the component is overwritten inside a loop and is not `v[k] = v[k] + e`: "
                "rebuilding a loop-carried value is no fix there (backward does not replay dynamic loops)"
            )
        name = target.value.value
        func = self.enclosing(assign, cst.FunctionDef)
        ctor = self._constructor(func, name) if func is not None else None
        if ctor is None:
            raise self.not_applicable(f"the type of {name} is not spelled out by a sized constructor or annotation")
        rows, cols = _shape(ctor)
        place = self._place(target, rows, cols)
        if place is None:
            raise self.not_applicable(f"{self.code(target)} does not name a component by integer literals")
        parts = []
        for r in range(rows):
            for c in range(cols):
                if (r, c) == place:
                    parts.append(self.code(assign.value))
                else:
                    parts.append(f"{name}[{c}]" if rows == 1 else f"{name}[{r}, {c}]")
        equal = assign.targets[0]
        new = self.expression(f"{ctor}({', '.join(parts)})")
        self.replace(assign, assign.with_changes(
            targets=[equal.with_changes(target=cst.Name(name))], value=new
        ))

    def _constructor(self, func: cst.FunctionDef, name: str) -> str | None:
        """The sized constructor (as written: ``wp.vec3``) of ``name``'s type in ``func``, None when unknown."""
        found: set[str] = set()
        for param in func.params.params:
            if param.name.value == name and param.annotation is not None:
                found.add(dotted(param.annotation.annotation) or "?")
        for node in self.nodes(func.body, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            if not any(isinstance(t, cst.Name) and t.value == name for t in targets):
                continue
            if isinstance(node, cst.AnnAssign):
                found.add(dotted(node.annotation.annotation) or "?")
            elif isinstance(node.value, cst.Call):
                found.add(dotted(node.value.func) or "?")
            else:
                found.add("?")
        if len(found) != 1:
            return None
        ctor = found.pop()
        return ctor if ctor != "?" and _shape(ctor) is not None else None

    def _place(self, target: cst.BaseExpression, rows: int, cols: int) -> tuple[int, int] | None:
        if isinstance(target, cst.Attribute):
            k = _ATTRS.index(target.attr.value)
            return (0, k) if rows == 1 and k < cols else None
        indices = []
        for element in target.slice:
            index = element.slice
            if not isinstance(index, cst.Index) or not isinstance(index.value, cst.Integer):
                return None
            indices.append(int(index.value.value))
        if rows == 1 and len(indices) == 1 and indices[0] < cols:
            return (0, indices[0])
        if rows > 1 and len(indices) == 2 and indices[0] < rows and indices[1] < cols:
            return (indices[0], indices[1])
        return None
