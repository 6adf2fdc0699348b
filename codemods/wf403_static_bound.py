"""WF403: make the bound of a dynamic loop static when every launch passes the same small constant.

Backward does not replay dynamic loops, so a value carried across iterations (``t = t * f(x[j])``)
gets a wrong adjoint. A loop ``for j in range(n)`` whose bound ``n`` is a kernel parameter that
every launch of the kernel (found through imports, ``codemods._resolve``) binds to the same integer
constant ``C <= max_unroll`` (16) becomes ``for j in range(wp.static(C))``: unrolled at compile time,
replayed exactly by backward, and computing the same float operations in the same order (forward
values unchanged). ``C`` is written as the module constant the kernel's file defines with that
value, else as the number. The parameter stays (other uses of ``n`` in the body, and every launch
site, are untouched).

Skipped, with the reason: the loop is in a ``@wp.func`` (its bound comes from its callers), is
nested in another loop, holds ``break``/``continue``, or its bound is not a plain parameter; a
launch passes something else than a literal or a module-level constant assigned once, launches
disagree, the constant exceeds 16, no launch is found, or the kernel is used other than launched.

Finding data: ``loop_line`` (the loop's ``for`` line). Without it, the span's line is the hazard
inside the loop, or the use after it (the kernel must then hold one such loop).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

import libcst as cst

from codemods._base import FindingCommand
from codemods._resolve import Binding, DiskSources, Sources, binding_in
from codemods.wf401_kernel_output import is_kernel

MAX_UNROLL = 16  # warp.config.max_unroll's default


def _bound_param(loop: cst.For, params: list[str]) -> str | None:
    """``n`` of ``for _ in range(n)`` / ``range(k, n)`` (k a literal), when ``n`` is a kernel parameter."""
    it = loop.iter
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"):
        return None
    args = [a.value for a in it.args]
    if not 1 <= len(args) <= 2 or any(a.keyword or a.star for a in it.args):
        return None
    stop = args[-1]
    if len(args) == 2 and not isinstance(args[0], cst.Integer):
        return None
    return stop.value if isinstance(stop, cst.Name) and stop.value in params else None


def _module_constants(tree: ast.Module) -> dict[str, int]:
    """Module-level ``NAME = <int>`` assigned exactly once in the whole file and never declared global."""
    values: dict[str, int] = {}
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int):
            values[stmt.targets[0].id] = stmt.value.value
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.Global):
            for name in node.names:
                counts[name] = counts.get(name, 0) + 2
        elif isinstance(node, ast.arg):
            counts[node.arg] = counts.get(node.arg, 0) + 2
    return {k: v for k, v in values.items() if counts.get(k) == 1}


def _kernel_ref(node: ast.expr, kernel: str, binding: Binding) -> bool:
    if isinstance(node, ast.Name):
        return node.id in binding.names
    if isinstance(node, ast.Attribute) and node.attr == kernel:
        return ast.unparse(node.value) in binding.modules
    return False


def launch_constants(path: str, text: str, kernel: str, index: int, binding: Binding,
                     imported: Callable[[str], int | None]) -> tuple[list[int], str | None]:
    """The constants the launches of ``kernel`` in this file bind at parameter ``index``; (values, why not).
    ``imported(name)``: the value of a module constant this file imports under ``name``, or None."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [], f"{path} does not parse"
    constants = _module_constants(tree)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    launched: set[int] = set()
    values: list[int] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "launch")
                or (isinstance(node.func, ast.Name) and node.func.id == "launch"))):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        ref = kw.get("kernel", node.args[0] if node.args else None)
        if ref is None or not _kernel_ref(ref, kernel, binding):
            continue
        launched.add(id(ref))
        where = f"{path}:{node.lineno}"
        bound: list[ast.expr] = []
        for slot, pos in (("inputs", 2), ("outputs", 3)):
            holder = kw.get(slot, node.args[pos] if len(node.args) > pos else None)
            if holder is None:
                continue
            if not isinstance(holder, (ast.List, ast.Tuple)) or any(isinstance(e, ast.Starred) for e in holder.elts):
                return [], f"the launch at {where} does not pass literal inputs/outputs lists"
            bound.extend(holder.elts)
        if index >= len(bound):
            return [], f"the launch at {where} binds fewer arguments than the kernel has"
        arg = bound[index]
        if isinstance(arg, ast.Constant) and type(arg.value) is int:
            values.append(arg.value)
        elif isinstance(arg, ast.Name) and arg.id in constants:
            values.append(constants[arg.id])
        elif isinstance(arg, ast.Name) and arg.id not in stored and imported(arg.id) is not None:
            values.append(imported(arg.id))
        else:
            return [], (f"the launch at {where} passes `{ast.unparse(arg)}`, not an integer literal or a "
                        "module constant assigned once")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in launched and isinstance(
                getattr(node, "ctx", None), ast.Load) and _kernel_ref(node, kernel, binding):
            return [], f"{kernel} is used at {path}:{node.lineno} other than as a launched kernel"
    return values, None


class StaticLoopBound(FindingCommand):
    DESCRIPTION = "WF403: make a dynamic loop's bound static when every launch passes the same constant."
    RULES = ("WF403",)
    DATA = {"loop_line": "line of the loop's `for` (default: the loop around the span, or the kernel's one loop)"}

    def describe_missing(self) -> str:
        return "no statement in a loop or after one"

    def plan(self, tree: cst.Module) -> None:
        stmt = self.on_line(cst.SimpleStatementLine)
        func = self.enclosing(stmt, cst.FunctionDef)
        if func is None:
            raise self.not_applicable("not in a function")
        if not is_kernel(func):
            raise self.not_applicable("the loop is in a @wp.func: its bound comes from its callers")
        params = [p.name.value for p in func.params.params]
        loops = [n for n in self.ancestors(stmt) if isinstance(n, cst.For)]
        if self.data.get("loop_line") is not None:
            at = int(self.data["loop_line"])
            given = [n for n in self.nodes(func, cst.For) if self.pos(n).start.line == at]
            if not given:
                raise self.not_applicable(f"no loop at line {at}")
            if any(isinstance(n, cst.For) for n in self.ancestors(given[0])):
                raise self.not_applicable("the loop is nested in another loop")
            loops = given
        elif len(loops) > 1:
            raise self.not_applicable("the loop is nested in another loop")
        if not loops:  # the use after the loop: the kernel's one dynamic loop over a parameter
            loops = [n for n in self.nodes(func, cst.For) if _bound_param(n, params)]
            if len(loops) != 1:
                raise self.not_applicable(f"{len(loops)} loops over a parameter bound in {func.name.value}(): "
                                          "cannot tell which one carries the value")
            if any(isinstance(n, cst.For) for n in self.ancestors(loops[0])):
                raise self.not_applicable("the loop is nested in another loop")
        loop = loops[0]
        param = _bound_param(loop, params)
        if param is None:
            raise self.not_applicable(f"the loop bound `{self.code(loop.iter)}` is not `range(<parameter>)`")
        if self.nodes(loop.body, (cst.Break, cst.Continue)):
            raise self.not_applicable("the loop holds break/continue")
        value = self._launched_constant(func.name.value, params.index(param))
        own = _module_constants(ast.parse(self.tree.code))
        name = next((k for k, v in own.items() if v == value), None)
        bound = cst.ensure_type(loop.iter, cst.Call).args[-1].value
        static = self.expression(f"{self.warp_alias()}.static({name or value})")
        self.replace(bound, static)
        self.context.scratch["summary"] = (
            f"static bound: every launch passes {param} = {name or value} ({value} <= {MAX_UNROLL}), so the loop "
            "is unrolled and replayed exactly")

    @staticmethod
    def _imported(name: str, path: str, texts: dict[str, str], project: Sources) -> int | None:
        """The value of the module constant ``name`` that ``path`` imports from a project file (plainly named)."""
        for home, text in texts.items():
            if home == path or not re.search(rf"^{re.escape(name)}\s*=", text, re.M):
                continue
            try:
                value = _module_constants(ast.parse(text)).get(name)
            except SyntaxError:
                continue
            if value is not None and name in binding_in(path, home, name, project).names:
                return value
        return None

    def _launched_constant(self, kernel: str, index: int) -> int:
        sources = self.context.scratch.get("sources")
        project = Sources(sources) if sources is not None else DiskSources()
        texts = sources if sources is not None else {self.file or "": self.tree.code}
        word = re.compile(rf"\b{re.escape(kernel)}\b")
        values: list[int] = []
        for path, text in texts.items():
            if path != self.file and not word.search(text):
                continue
            binding = binding_in(path, self.file or path, kernel, project)
            if not binding:
                continue
            found, why = launch_constants(path, text, kernel, index, binding,
                                          lambda name, path=path: self._imported(name, path, texts, project))
            if why:
                raise self.not_applicable(why)
            values.extend(found)
        if not values:
            raise self.not_applicable(f"no launch of {kernel} found: its bound cannot be checked")
        if len(set(values)) > 1:
            raise self.not_applicable(f"the launches of {kernel} pass different bounds {sorted(set(values))}")
        if values[0] > MAX_UNROLL or values[0] < 0:
            raise self.not_applicable(f"the launches pass {values[0]}, more than max_unroll ({MAX_UNROLL})")
        return values[0]
