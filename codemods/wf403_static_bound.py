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

When the bound cannot be made static and the finding is a use after the loop (not a carry inside
it), the loop moves into a new ``@wp.func`` instead (``codemods._loop_to_func``), where its shape
allows; the report then gives both reasons when neither applies.

Finding data: ``loop_line`` (the loop's ``for`` line). Without it, the span's line is the hazard
inside the loop, or the use after it (the kernel must then hold one such loop).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

import libcst as cst

from codemods._base import FindingCommand, NotApplicable
from codemods._loop_to_func import NotExtractable, loop_into_func
from codemods._resolve import Binding, DiskSources, Sources, binding_in
from codemods.wf401_kernel_output import is_kernel
from warpfix.model.loop_fix import MAX_UNROLL, module_constants


def _bound_param(loop: cst.For, params: list[str]) -> str | None:
    """``n`` of ``for _ in range(n)`` / ``range(k, n)`` (k a literal), when ``n`` is a kernel parameter
    (``warpfix.model.loop_fix.bound_param`` is the detector's copy, on the ``ast``)."""
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
    constants = module_constants(tree)
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
            if _is_func(func) and not any(isinstance(n, cst.For) for n in self.ancestors(stmt)):
                self.post_processing_to_callers(func, stmt)
                return
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
        try:
            self.static_bound(func, loop, params)
        except NotApplicable as refused:
            if any(n is loop for n in self.ancestors(stmt)):  # a carry inside the loop: a function would keep it
                raise
            static_why = str(refused).removeprefix(f"line {self.line}: ")
            try:
                self.context.scratch["summary"] = loop_into_func(self, func, loop)
            except NotExtractable as why:
                raise self.not_applicable(f"{static_why}; nor can the loop become a @wp.func: {why}") from None

    def static_bound(self, func: cst.FunctionDef, loop: cst.For, params: list[str]) -> None:
        """``range(n)`` -> ``range(wp.static(C))`` when every launch passes the same constant ``C``."""
        param = _bound_param(loop, params)
        if param is None:
            raise self.not_applicable(f"the loop bound `{self.code(loop.iter)}` is not `range(<parameter>)`")
        if self.nodes(loop.body, (cst.Break, cst.Continue)):
            raise self.not_applicable("the loop holds break/continue")
        value = self._launched_constant(func.name.value, params.index(param))
        own = module_constants(ast.parse(self.tree.code))
        name = next((k for k, v in own.items() if v == value), None)
        bound = cst.ensure_type(loop.iter, cst.Call).args[-1].value
        static = self.expression(f"{self.warp_alias()}.static({name or value})")
        self.replace(bound, static)
        self.context.scratch["summary"] = (
            f"static bound: every launch passes {param} = {name or value} ({value} <= {MAX_UNROLL}), so the loop "
            "is unrolled and replayed exactly")

    def post_processing_to_callers(self, func: cst.FunctionDef, stmt: cst.SimpleStatementLine) -> None:
        """``return s / t`` after a dynamic loop of a ``@wp.func`` -> ``return s, t``; each caller
        ``m = f(...)`` becomes ``m_s, m_t = f(...)`` then ``m = m_s / m_t``: the same operations
        (forward unchanged), now outside the loop's function, where backward replays them."""
        name = func.name.value
        ret = stmt.body[0] if len(stmt.body) == 1 else None
        body = list(cst.ensure_type(func.body, cst.IndentedBlock).body)
        if not isinstance(ret, cst.Return) or ret.value is None or body[-1] is not stmt:
            raise self.not_applicable(f"the use after the loop is not the final `return` of {name}()")
        if isinstance(ret.value, cst.Tuple):
            raise self.not_applicable(f"{name}() already returns several values")
        params = [p.name.value for p in func.params.params]
        if func.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or func.params.kwonly_params:
            raise self.not_applicable(f"{name}() has *args or keyword-only parameters")
        carried: list[str] = []
        for loop in self.nodes(func, cst.For):
            for node in self.nodes(loop.body, (cst.AugAssign, cst.AssignTarget)):
                target = node.target
                if isinstance(target, cst.Name) and target.value not in carried:
                    carried.append(target.value)
        raw: list[str] = []
        for use in _value_names(ret.value):
            if use.value in carried:
                if use.value not in raw:
                    raw.append(use.value)
            elif use.value not in params:
                raise self.not_applicable(f"the returned expression reads `{use.value}`, neither a parameter nor "
                                          "a value the loop computes")
        if not raw:
            raise self.not_applicable("the returned expression uses no value the loop computes")
        returned = ", ".join(raw)
        self.replace(ret, ret.with_changes(value=self.expression(returned)))
        calls = [c for c in self.nodes(self.tree, cst.Call) if isinstance(c.func, cst.Name) and c.func.value == name]
        uses = [n for n in self.nodes(self.tree, cst.Name) if n.value == name and n is not func.name]
        if len(uses) != len(calls):
            raise self.not_applicable(f"{name} is used other than called")
        sources = self.context.scratch.get("sources") or {}
        project = Sources(sources)
        others = [p for p, t in sources.items() if p != self.file and re.search(rf"\b{re.escape(name)}\b", t)
                  and binding_in(p, self.file or "", name, project)]
        if others:
            raise self.not_applicable(f"{name}() is also called from {others[0]}: all or nothing")
        if not calls:
            raise self.not_applicable(f"no call of {name}() found")
        for call in calls:
            self._rewrite_call(call, params, raw, ret.value)
        self.context.scratch["summary"] = (
            f"post-processing to the caller: {name}() returns {returned}, and its {len(calls)} caller(s) compute "
            f"`{self.code(ret.value)}`")

    def _rewrite_call(self, call: cst.Call, params: list[str], raw: list[str], expr: cst.BaseExpression) -> None:
        where = f"the call at line {self.pos(call).start.line}"
        assign = self.parent(call)
        line = self.parent(assign)
        if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name) and isinstance(line, cst.SimpleStatementLine)
                and len(line.body) == 1):
            raise self.not_applicable(f"{where} is not a statement `name = {self.code(call.func)}(...)`")
        target = cst.ensure_type(assign.targets[0].target, cst.Name).value
        mapping: dict[str, cst.BaseExpression] = {}
        for i, arg in enumerate(call.args):
            if arg.star:
                raise self.not_applicable(f"{where} passes *args")
            key = arg.keyword.value if arg.keyword else (params[i] if i < len(params) else None)
            if key is None:
                raise self.not_applicable(f"{where} passes more arguments than the function has")
            if self.nodes(arg.value, cst.Call):
                raise self.not_applicable(f"{where} passes a call as `{key}`: it would be evaluated twice")
            mapping[key] = arg.value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if isinstance(
                arg.value, cst.BinaryOperation) else arg.value
        missing = [u.value for u in _value_names(expr) if u.value in params and u.value not in mapping]
        if missing:
            raise self.not_applicable(f"{where} leaves `{missing[0]}` to its default")
        scope = self.enclosing(call, cst.FunctionDef) or self.tree
        fresh = {r: self.fresh_name(f"{target}_{r}", scope) for r in raw}
        mapping.update({r: cst.Name(fresh[r]) for r in raw})
        names = ", ".join(fresh[r] for r in raw)
        unpack = self.statement(f"{names} = {self.code(call)}\n")
        value = expr.visit(_Rename(mapping))
        rebuilt = line.with_changes(body=[assign.with_changes(value=value)])
        self.replace(line, unpack.with_changes(leading_lines=line.leading_lines))
        self.insert_after(line, [rebuilt.with_changes(leading_lines=[])])

    @staticmethod
    def _imported(name: str, path: str, texts: dict[str, str], project: Sources) -> int | None:
        """The value of the module constant ``name`` that ``path`` imports from a project file (plainly named)."""
        for home, text in texts.items():
            if home == path or not re.search(rf"^{re.escape(name)}\s*=", text, re.M):
                continue
            try:
                value = module_constants(ast.parse(text)).get(name)
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


def _is_func(func: cst.FunctionDef) -> bool:
    for dec in func.decorators:
        node = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        if isinstance(node, cst.Attribute) and node.attr.value == "func" or isinstance(node, cst.Name) and node.value == "func":
            return True
    return False


def _value_names(expr: cst.BaseExpression) -> list[cst.Name]:
    """The Names of ``expr`` that stand for values (not a called function, not an attribute's name)."""
    out: list[cst.Name] = []

    class Walk(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> bool:
            if not isinstance(node.func, cst.Name):
                node.func.visit(self)
            for arg in node.args:
                arg.visit(self)
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)  # `s.x`: `s` is a value; `x` is a component name
            return False

        def visit_Name(self, node: cst.Name) -> None:
            out.append(node)

    expr.visit(Walk())
    return out


class _Rename(cst.CSTTransformer):
    def __init__(self, mapping: dict[str, cst.BaseExpression]) -> None:
        self.mapping = mapping

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.mapping.get(original.value, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        return updated.with_changes(func=original.func) if isinstance(original.func, cst.Name) else updated
