"""Component writes to local vectors/matrices/quaternions in a kernel body (WF402): which locals
hold composite values, and which components are assigned more than once."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from warpfix.model.facts import KernelDef
from warpfix.model.kernel_flow import COMPOSITE_CTORS, Flow, array_dtype, is_array_annotation
from warpfix.model.reach import function_body_nodes
from warpfix.model.source import SourceFile

if TYPE_CHECKING:
    from warpfix.model import Project


_COMPONENT_ATTRS = {"x": 0, "y": 1, "z": 2, "w": 3}
#: Builtins whose result is always a vector/matrix/quaternion/transform.
_COMPOSITE_RESULTS = frozenset(
    {
        "cross", "normalize", "outer", "transpose", "inverse", "skew", "quat_rotate", "quat_rotate_inv",
        "quat_inverse", "quat_from_axis_angle", "quat_from_matrix", "quat_to_matrix", "transform_point",
        "transform_vector", "transform_get_translation", "transform_get_rotation", "transform_inverse",
        "transform_multiply", "cw_mul", "cw_div", "diag",
    }
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# WF402
# ---------------------------------------------------------------------------------------------
def component_key(src: SourceFile, target: ast.expr) -> tuple[str, str] | None:
    """(local name, component) for ``v[0]``, ``m[1, 2]``, ``m[1][2]``, ``v.x``; None otherwise
    (and for a component whose index is not a constant)."""
    parts: list[str] = []
    node = target
    while True:
        if isinstance(node, ast.Subscript):
            try:
                index = ast.literal_eval(node.slice)
            except (ValueError, TypeError, SyntaxError):
                return None
            parts.extend(repr(i) for i in reversed(index if isinstance(index, tuple) else (index,)))
            node = node.value
        elif isinstance(node, ast.Attribute) and node.attr in _COMPONENT_ATTRS:
            parts.append(repr(_COMPONENT_ATTRS[node.attr]))
            node = node.value
        else:
            break
    if not parts or not isinstance(node, ast.Name):
        return None
    return node.id, ",".join(reversed(parts))


def kernel_overwrites(kd: KernelDef) -> bool:
    for opts in (kd.options, kd.options.get("module_options")):
        if isinstance(opts, dict) and opts.get("enable_vector_component_overwrites") is True:
            return True
    return False


# a line that assigns ``True`` to ``enable_vector_component_overwrites`` (the statement is then read)
# (on that line, or after a parenthesis or backslash that continues it)
_SETS_OVERWRITES = re.compile(r"enable_vector_component_overwrites\s*=(?!=)(?:[^\n]*\bTrue\b|[\s(\\]*True\b)")


def project_overwrites(project: Project) -> bool:
    """Whether ``wp.config.enable_vector_component_overwrites = True`` turns on the copy-on-write
    lowering for the whole program (a module's own ``set_module_options`` is its kernels' option:
    :func:`kernel_overwrites`)."""
    for src in project.files.values():
        if not _SETS_OVERWRITES.search(src.text):
            continue  # no syntax tree is read for nothing
        for node in src.nodes_of(ast.Assign):
            if isinstance(node.value, ast.Constant) and node.value.value is True and any(
                src.warp_name(t) == "config.enable_vector_component_overwrites" for t in node.targets
            ):
                return True
    return False


class ComponentWrites:
    """Walks a body in statement order tracking which components of each composite local hold a
    value that carries a gradient: set by a plain ``=`` component write, or by the binding of
    the local itself (a load, arithmetic, a constructor argument that is not a constant). A
    later ``=`` to such a component is a hit. A rebinding resets the local; ``if``/``else``
    branches are alternatives; a loop body runs twice (a component written in a loop over a
    value defined outside it is written again on the next iteration)."""

    ALL = "*"  # every component

    def __init__(self, src: SourceFile, flow: Flow, composites: set[str]) -> None:
        self.src = src
        self.flow = flow
        self.composites = composites
        self.hits: dict[int, tuple[ast.stmt, str, str, ast.stmt]] = {}

    def run(self, fn: ast.FunctionDef) -> None:
        state = {
            (a.arg, self.ALL): fn
            for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            if a.arg in self.composites and a.arg in self.flow.sources
        }
        self.block(fn.body, state)

    def block(self, body: list[ast.stmt], state: dict[tuple[str, str], ast.stmt]) -> dict:
        for s in body:
            state = self.stmt(s, state)
        return state

    def _bound_components(self, value: ast.expr) -> list[str]:
        """The components a binding ``v = value`` fills with gradient-carrying values."""
        if isinstance(value, ast.Call) and _names_composite(self.src, value.func):
            args = value.args
            name = (self.src.warp_name(value.func) or "").rpartition(".")[2]
            if len(args) > 1 and name.startswith(("vec", "quat", "spatial_vector")):
                return [repr(k) for k, a in enumerate(args) if self.flow.carries_gradient(a)]
            return [self.ALL] if any(self.flow.carries_gradient(a) for a in args) else []
        return [self.ALL] if self.flow.carries_gradient(value) else []

    def stmt(self, s: ast.stmt, state: dict) -> dict:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                rebound = [t] if isinstance(t, ast.Name) else list(t.elts) if isinstance(t, ast.Tuple) else []
                for n in rebound:
                    if isinstance(n, ast.Name):
                        state = {k: v for k, v in state.items() if k[0] != n.id}
                if isinstance(t, ast.Name) and t.id in self.composites and s.value is not None:
                    state = {**state, **{(t.id, c): s for c in self._bound_components(s.value)}}
                    continue
                key = component_key(self.src, t)
                if key is None or key[0] not in self.composites:
                    continue
                earlier = state.get(key) or state.get((key[0], self.ALL))
                if earlier is not None:
                    self.hits.setdefault(id(s), (s, key[0], key[1], earlier))
                state = {**state, key: state.get(key, s)}
            return state
        if isinstance(s, ast.If):
            a = self.block(s.body, dict(state))
            b = self.block(s.orelse, dict(state))
            return {**b, **a}
        if isinstance(s, (ast.For, ast.While)):
            once = self.block(s.body, dict(state))
            twice = self.block(s.body, dict(once))
            return self.block(s.orelse, twice)
        if isinstance(s, ast.With):
            return self.block(s.body, state)
        return state


def assign_target(stmt: ast.stmt) -> ast.expr:
    if isinstance(stmt, ast.Assign):
        return stmt.targets[0]
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        return stmt.target
    return ast.Constant(None)


def composite_locals(src: SourceFile, kd: KernelDef, fn: ast.FunctionDef) -> set[str]:
    """Locals bound to a vector/matrix/quaternion/transform value: from a constructor call, or
    a load of an array element whose dtype is such a type; func parameters of such types."""
    out: set[str] = set()
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    anns = {a.arg: a.annotation for a in args}
    for a in args:
        if kd.kind == "func" and _names_composite(src, a.annotation):
            out.add(a.arg)
    assigns = [
        (node.targets if isinstance(node, ast.Assign) else [node.target], node.value)
        for node in function_body_nodes(fn)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
    ]

    def composite(value: ast.expr) -> bool:
        if isinstance(value, ast.Call):
            wn = src.warp_name(value.func)
            return _names_composite(src, value.func) or (
                wn is not None and wn.rpartition(".")[2] in _COMPOSITE_RESULTS
            )
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            ann = anns.get(value.value.id)
            return ann is not None and is_array_annotation(src, ann) and _array_of_composite(src, ann)
        if isinstance(value, ast.BinOp):  # vector arithmetic: d = p[i + 1] - p[i], v = 0.5 * (a + b)
            return composite(value.left) or composite(value.right)
        if isinstance(value, ast.Name):
            return value.id in out
        return False

    changed = True
    while changed:
        changed = False
        for targets, value in assigns:
            names = {t.id for t in targets if isinstance(t, ast.Name)} - out
            if names and composite(value):
                out |= names
                changed = True
    return out


def _names_composite(src: SourceFile, node: ast.expr | None) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Call):  # wp.types.vector(length=5, dtype=float)(...)
        return _names_composite(src, node.func)
    name = src.warp_name(node)
    if name is not None:
        return name.rpartition(".")[2] in COMPOSITE_CTORS
    if isinstance(node, ast.Name):  # a module-level alias: vec5 = wp.types.vector(length=5, dtype=float)
        for stmt in src.tree.body:
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets
            ):
                return isinstance(stmt.value, ast.Call) and _names_composite(src, stmt.value.func)
    return False


def _array_of_composite(src: SourceFile, ann: ast.expr) -> bool:
    if not isinstance(ann, (ast.Call, ast.Subscript)):
        return False
    dtype = array_dtype(ann)
    ndim = 1
    base = ann.func if isinstance(ann, ast.Call) else ann.value
    wn = src.warp_name(base) or ""
    if wn.endswith(("array2d", "array3d", "array4d")):
        ndim = int(wn[-2])
    return ndim == 1 and _names_composite(src, dtype)
