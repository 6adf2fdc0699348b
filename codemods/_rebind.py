"""Whether a codemod may rebind a place (``dst = src``, ``b = wp.empty_like(b)``) so that later code
reads the new value: a local, a parameter handed back to the callers (``return_through``), and never a
place a graph capture's replay would not see rebound (:mod:`warpfix.model.capture`).

A mixin of :class:`codemods._base.FindingCommand`: it works on the command's tree, metadata and edits,
and refuses with its :meth:`~codemods._base.FindingCommand.not_applicable`.
"""

from __future__ import annotations

import libcst as cst

from codemods._cst import keyword, positional, target_names
from codemods._resolve import Sources, binding_in, same_file
from warpfix.model.capture import rebinding_refusal


class RebindChecks:
    """The rebinding checks of :class:`~codemods._base.FindingCommand` (a mixin)."""

    def check_rebindable(
        self, arg: cst.BaseExpression, line: cst.BaseStatement, where: str = "", *, through_return: bool = False
    ) -> None:
        """Raise :class:`NotApplicable` unless ``arg = ...`` at ``line`` rebinds what later code reads.

        With ``through_return``, a parameter of a helper (``def run(signal): ... launch(..., signal)``)
        is rebindable when the helper can hand the new array back: see :meth:`return_through`.
        """
        where = where or f"line {self.line}"
        if not isinstance(arg, (cst.Name, cst.Attribute, cst.Subscript)) or any(
            isinstance(n, cst.Call) for n in self.nodes(arg, cst.Call)
        ):
            raise self.not_applicable(f"{where}: {self.code(arg)} cannot be rebound")
        self.refuse_if_captured(arg, line, where)
        if not isinstance(arg, cst.Name):
            return
        func = self.enclosing(line, cst.FunctionDef)
        if func is None:
            return
        assigned = {name for a in self.nodes(func.body, cst.Assign) for t in a.targets for name in target_names(t.target)}
        if arg.value in {p.name.value for p in func.params.params}:
            if arg.value not in assigned:  # a parameter the function already rebinds is a local like any
                if through_return:
                    self.return_through(func, arg.value, where)
                    return
                raise self.not_applicable(
                    f"{where}: rebinding parameter {arg.value} of {func.name.value}() would not reach its caller"
                )
        elif arg.value not in assigned:
            raise self.not_applicable(f"{where}: {arg.value} is not a local of {func.name.value}()")

    def refuse_if_captured(self, arg: cst.BaseExpression, line: cst.BaseStatement, where: str) -> None:
        """Raise :class:`NotApplicable` when a graph capture runs ``line`` and ``arg`` outlives the call:
        a replay of the graph reruns the captured launches on the arrays of the first run, not the
        rebinding, while code outside the graph (an optimizer step, a reset) works on what the
        attribute, element or module-level name holds after it (:mod:`warpfix.model.capture`). A local
        name of a function is rebound for that run alone: every later use of it is captured too, on
        the arrays the capture saw, so it stays fixable. No strategy that rebinds nothing applies."""
        func = self.enclosing(line, cst.FunctionDef)
        if isinstance(arg, cst.Name) and func is not None and not any(
            isinstance(n, (cst.Global, cst.Nonlocal)) and any(a.name.value == arg.value for a in n.names)
            for n in self.nodes(func.body, (cst.Global, cst.Nonlocal))
        ):
            return
        filename = self.context.filename or ""
        sources = {**(self.context.scratch.get("sources") or {}), filename: self.tree.code}
        funcs = [a.name.value for a in self.ancestors(line) if isinstance(a, cst.FunctionDef)]
        why = rebinding_refusal(sources, filename, self.pos(line).start.line, funcs, self.code(arg))
        if why is not None:
            raise self.not_applicable(f"{where}: {why}")

    def return_through(self, func: cst.FunctionDef, param: str, where: str) -> None:
        """Hand a rebound parameter back to the callers: ``return <param>`` ends ``func`` and every call
        ``func(..., a, ...)`` (a statement of its own) becomes ``a = func(..., a, ...)``. All or nothing:
        ``func`` must be a module-level function of this file that returns nothing, imported by no other
        file, used only in such calls, each passing a rebindable argument for ``param``."""
        name = func.name.value
        why = f"{where}: {param} is a parameter of {name}()"
        if not isinstance(self.parent(func), cst.Module) or not isinstance(func.body, cst.IndentedBlock):
            raise self.not_applicable(f"{why}, which is not a module-level function")
        if self.nodes(func.body, (cst.Return, cst.Yield)):
            raise self.not_applicable(f"{why}, which already returns (or yields) something")
        params = [p.name.value for p in func.params.params]
        index = params.index(param)
        calls = []
        for node in self.nodes(self.tree, cst.Name):
            if node.value != name or node is func.name:
                continue
            call = self.parent(node)
            expr = self.parent(call) if isinstance(call, cst.Call) and call.func is node else None
            stmt = self.parent(expr) if isinstance(expr, cst.Expr) else None
            if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
                raise self.not_applicable(
                    f"{why}, used at line {self.pos(node).start.line} other than as a call statement of its own"
                )
            kw = keyword(call, param)
            args = positional(call)
            bound = kw.value if kw is not None else args[index].value if index < len(args) else None
            if bound is None or any(a.star for a in call.args):
                raise self.not_applicable(f"{why}; the call at line {self.pos(call).start.line} does not pass it plainly")
            self.check_rebindable(bound, stmt, f"the call of {name}() at line {self.pos(call).start.line}")
            calls.append((expr, call, bound))
        if not calls:
            raise self.not_applicable(f"{why}, which is never called in this file")
        sources = self.context.scratch.get("sources") or {}
        project = Sources(sources)
        importers = [p for p in sources if not same_file(p, self.context.filename or "")
                     and binding_in(p, self.context.filename or "", name, project)]
        if importers:
            raise self.not_applicable(f"{why}, which {importers[0]} imports: its calls there are not rewritten")
        for expr, call, bound in calls:
            self.replace(expr, cst.Assign(targets=[cst.AssignTarget(bound)], value=call, semicolon=expr.semicolon))
        returned = self.statement(f"return {param}\n")
        done = self.context.scratch.setdefault("returned", set())
        if (id(func), param) not in done:
            done.add((id(func), param))
            self.replace(func.body, lambda new: new.with_changes(body=[*new.body, returned]))
        self.context.scratch["summary"] = (
            f"{name}() now returns the new {param}; {len(calls)} call site(s) rebind it"
        )
