"""Mutation operators of the mutation benchmark: each plants one RULES.md bug class by a libcst rewrite.

An operator lists its *sites* in a module (``count``) and rewrites exactly one of them
(``mutate``), keeping the rest of the file byte for byte. Sites are restricted to the code a
tape plausibly records (see ``TapedScope``) where the bug class only matters there; the
benchmark's gradient filter then discards the mutants whose gradient did not change.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

ALLOCATORS = {"zeros", "empty", "full", "array", "zeros_like", "empty_like", "full_like", "clone", "ones"}


def code_of(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def dotted(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted(expr.value)
        return None if base is None else f"{base}.{expr.attr.value}"
    return None


def call_name(call: cst.Call) -> str | None:
    return dotted(call.func)


def is_wp_call(node: cst.CSTNode, names: set[str]) -> bool:
    if not isinstance(node, cst.Call):
        return False
    name = call_name(node)
    return name is not None and name.startswith("wp.") and name[3:] in names


def decorator_names(fn: cst.FunctionDef) -> set[str]:
    out = set()
    for dec in fn.decorators:
        expr = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        name = dotted(expr)
        if name:
            out.add(name)
    return out


def is_tape_with(node: cst.With) -> bool:
    """``with wp.Tape() [as t]:`` or ``with <something named *tape*>:``."""
    for item in node.items:
        expr = item.item
        if isinstance(expr, cst.Call) and call_name(expr) in ("wp.Tape", "warp.Tape", "Tape"):
            return True
        name = dotted(expr)
        if name and "tape" in name.split(".")[-1].lower():
            return True
    return False


def simple_callee(call: cst.Call) -> str | None:
    """``f`` for ``f(...)`` and ``self.f(...)``: the project function a call may reach."""
    if isinstance(call.func, cst.Name):
        return call.func.value
    if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name) and call.func.value.value == "self":
        return call.func.attr.value
    return None


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.calls: set[str] = set()
        self.launched: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        callee = simple_callee(node)
        if callee:
            self.calls.add(callee)
        if call_name(node) in ("wp.launch", "wp.launch_tiled"):
            kernel = node.args[0].value if node.args and node.args[0].keyword is None else None
            for arg in node.args:
                if arg.keyword and arg.keyword.value == "kernel":
                    kernel = arg.value
            name = dotted(kernel) if kernel is not None else None
            if name:
                self.launched.add(name.split(".")[-1])
        # wp.func calls from kernels: any plain call may reach one
        if isinstance(node.func, cst.Name):
            self.launched.add(node.func.value)


def _calls_in(node: cst.CSTNode) -> _Calls:
    visitor = _Calls()
    node.visit(visitor)
    return visitor


class TapedScope:
    """Which functions and kernels of one file a tape plausibly records.

    The bodies of ``with <tape>:`` blocks, the functions and methods they call by name
    (``f()``, ``self.f()``), transitively; the kernels launched there, and the ``@wp.func``s
    those kernels call. A site-selection heuristic, not warpfix's model.
    """

    def __init__(self, module: cst.Module) -> None:
        self.functions: dict[str, list[cst.FunctionDef]] = {}
        self.kernels: dict[str, cst.FunctionDef] = {}
        withs: list[cst.With] = []

        class Collect(cst.CSTVisitor):
            def visit_FunctionDef(inner, node: cst.FunctionDef) -> None:  # noqa: N805
                decs = decorator_names(node)
                if decs & {"wp.kernel", "wp.func", "warp.kernel", "warp.func"}:
                    self.kernels[node.name.value] = node
                else:
                    self.functions.setdefault(node.name.value, []).append(node)

            def visit_With(inner, node: cst.With) -> None:  # noqa: N805
                if is_tape_with(node):
                    withs.append(node)

        module.visit(Collect())
        self.tape_withs = withs
        taped: set[str] = set()
        launched: set[str] = set()
        todo: list[cst.CSTNode] = [w.body for w in withs]
        while todo:
            calls = _calls_in(todo.pop())
            launched |= calls.launched
            for name in calls.calls - taped:
                if name in self.functions:
                    taped.add(name)
                    todo.extend(fn.body for fn in self.functions[name])
        self.taped_functions = taped
        kernels: set[str] = set()
        todo_k = [k for k in launched if k in self.kernels]
        while todo_k:
            name = todo_k.pop()
            if name in kernels:
                continue
            kernels.add(name)
            todo_k.extend(c for c in _calls_in(self.kernels[name].body).launched if c in self.kernels)
        self.taped_kernels = kernels


@dataclass
class Mutant:
    operator: str
    site: int
    code: str
    line: int  # line of the planted bug in the mutant (1-based)
    anchors: list[int] = field(default_factory=list)  # further lines a finding may point at


def changed_line(before: str, after: str, last: bool = False) -> int:
    """First (or, with ``last``, final) line of the first insertion or replacement in the mutant, else the
    first deleted position."""
    ops = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False).get_opcodes()
    for tag, _i1, _i2, j1, j2 in ops:
        if tag in ("insert", "replace"):
            return j2 if last else j1 + 1
    for tag, _i1, _i2, j1, _j2 in ops:
        if tag == "delete":
            return j1 + 1
    return 0


class Operator:
    """One bug class. Subclasses implement ``transformer(target)``: a transformer that rewrites the
    ``target``-th site (``target=-1`` rewrites nothing and only counts)."""

    name = ""
    rule = ""
    accepts: frozenset[str] = frozenset()
    description = ""
    mark_last = False  # the bug is the last line of the changed chunk (a statement split in two)
    moves_backward = False  # the mutant's first backward runs earlier in the program than the original's

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        raise NotImplementedError

    def count(self, source: str) -> int:
        module = cst.parse_module(source)
        t = self.transformer(module, -1)
        module.visit(t)
        return t.seen

    def mutate(self, source: str, site: int) -> Mutant | None:
        module = cst.parse_module(source)
        t = self.transformer(module, site)
        new = module.visit(t)
        if not t.done:
            return None
        code = new.code
        cst.parse_module(code)
        return Mutant(self.name, site, code, changed_line(source, code, self.mark_last), self.anchors(code))

    def anchors(self, code: str) -> list[int]:
        return []


class SiteTransformer(cst.CSTTransformer):
    """Counts sites in visiting order and rewrites the ``target``-th; tracks the taped context."""

    def __init__(self, scope: TapedScope, target: int) -> None:
        super().__init__()
        self.scope = scope
        self.target = target
        self.seen = 0
        self.done = False
        self.fn_stack: list[str] = []
        self.with_depth = 0

    def take(self) -> bool:
        """Register one site; True when it is the one to rewrite."""
        hit = self.seen == self.target
        self.seen += 1
        if hit:
            self.done = True
        return hit

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.fn_stack.append(node.name.value)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.fn_stack.pop()
        return updated

    def visit_With(self, node: cst.With) -> None:
        if is_tape_with(node):
            self.with_depth += 1

    def leave_With(self, original: cst.With, updated: cst.With) -> cst.BaseStatement:
        if is_tape_with(original):
            self.with_depth -= 1
        return updated

    @property
    def in_taped_host(self) -> bool:
        return self.with_depth > 0 or any(f in self.scope.taped_functions for f in self.fn_stack)

    @property
    def in_taped_kernel(self) -> bool:
        return bool(self.fn_stack) and self.fn_stack[-1] in self.scope.taped_kernels


def _single_expr(stmt: cst.CSTNode) -> cst.BaseExpression | None:
    """The expression of a one-expression simple statement line."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr):
        return stmt.body[0].value
    return None


def _single_assign(stmt: cst.CSTNode) -> cst.Assign | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        return stmt.body[0]
    return None


class BlockTransformer(SiteTransformer):
    """Statement-level edits: ``edit(stmt, body, index)`` returns the replacement list or None (no site)."""

    def edit(self, body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement] | None:
        raise NotImplementedError

    def is_site(self, body: Sequence[cst.BaseStatement], index: int) -> bool:
        raise NotImplementedError

    def _rewrite(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement] | None:
        out: list[cst.BaseStatement] = list(body)
        for index in range(len(body)):
            if self.is_site(body, index) and self.take():
                return self.edit(body, index)
        return None if out == list(body) else out

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        new = self._rewrite(updated.body)
        return updated if new is None else updated.with_changes(body=new)


def _lines_matching(code: str, needle: str) -> list[int]:
    return [n for n, text in enumerate(code.splitlines(), 1) if needle in text]


# --- WF103 / WF104 / WF106: aliased solver states -------------------------------------------


class _AliasStep(SiteTransformer):
    """``f(s[t], s[t + 1], ...)`` (or a launch with ``s[t]`` in inputs and ``s[t + 1]`` in outputs)
    -> the same ``s[t]`` as input and output."""

    @staticmethod
    def _subscripts(call: cst.Call) -> list[cst.Subscript]:
        found: list[cst.Subscript] = []

        def add(expr: cst.BaseExpression) -> None:
            if isinstance(expr, cst.Subscript):
                found.append(expr)
            elif isinstance(expr, cst.Attribute):
                add(expr.value)
            elif isinstance(expr, (cst.List, cst.Tuple)):
                for el in expr.elements:
                    add(el.value)

        for arg in call.args:
            add(arg.value)
        return found

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not self.in_taped_host or self.done and self.target >= 0:
            return updated
        subs = self._subscripts(updated)
        for a in subs:
            for b in subs:
                if a is b or code_of(a.value) != code_of(b.value) or len(a.slice) != 1 or len(b.slice) != 1:
                    continue
                if "".join(code_of(b.slice[0].slice).split()) == "".join(code_of(a.slice[0].slice).split()) + "+1":
                    if self.take():
                        return updated.deep_replace(b, a.deep_clone())
                    return updated
        return updated


class AliasStep(Operator):
    name = "alias-step"
    rule = "WF104"
    accepts = frozenset({"WF103", "WF104", "WF106"})
    description = "solver.step(s[t], s[t], ...): the same state read and written by one step"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _AliasStep(TapedScope(module), target)


class _ListAlias(SiteTransformer):
    def leave_ListComp(self, original: cst.ListComp, updated: cst.ListComp) -> cst.BaseExpression:
        comp = updated.for_in
        if comp.inner_for_in is not None or comp.ifs or not isinstance(updated.elt, cst.Call):
            return updated
        if not (isinstance(comp.iter, cst.Call) and call_name(comp.iter) == "range" and len(comp.iter.args) == 1):
            return updated
        targets = {n.value for n in m.findall(comp.target, m.Name())}  # type: ignore[union-attr]
        used = {n.value for n in m.findall(updated.elt, m.Name())}  # type: ignore[union-attr]
        if targets & used or not self.take():
            return updated
        count = comp.iter.args[0].value
        if not isinstance(count, (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)):
            count = count.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.BinaryOperation(
            left=cst.List([cst.Element(updated.elt)]),
            operator=cst.Multiply(whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")),
            right=count,
            lpar=updated.lpar,
            rpar=updated.rpar,
        )


class ListAlias(Operator):
    name = "list-alias"
    rule = "WF103"
    accepts = frozenset({"WF103", "WF104"})
    description = "[make_state() for _ in range(n)] -> [make_state()] * n: every list item is one buffer"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _ListAlias(TapedScope(module), target)


class _PingPong(BlockTransformer):
    """After ``X = [make() for _ in range(n)]``: ``X = [X[0]] + [X[1 + i % 2] for i in range(len(X) - 1)]``,
    so the trajectory after the initial state alternates between two buffers (step N+1 writes what
    step N read). The initial state stays its own buffer, so a forward that runs again (a gradient
    check, the next iteration) starts from the same state. The forward is unchanged when each step
    writes every output element and only the last state is read afterwards; the tape's replay of
    the earlier steps is not."""

    def is_site(self, body: Sequence[cst.BaseStatement], index: int) -> bool:
        assign = _single_assign(body[index])
        if assign is None or len(assign.targets) != 1 or dotted(assign.targets[0].target) is None:
            return False
        comp = assign.value
        if not isinstance(comp, cst.ListComp) or comp.for_in.inner_for_in is not None or comp.for_in.ifs:
            return False
        it = comp.for_in.iter
        return isinstance(comp.elt, cst.Call) and isinstance(it, cst.Call) and call_name(it) == "range"

    def edit(self, body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
        assign = _single_assign(body[index])
        assert assign is not None
        name = dotted(assign.targets[0].target)
        alias = cst.parse_statement(f"{name} = [{name}[0]] + [{name}[1 + i % 2] for i in range(len({name}) - 1)]")
        return [*body[: index + 1], alias, *body[index + 1:]]


class PingPong(Operator):
    name = "ping-pong"
    rule = "WF104"
    accepts = frozenset({"WF103", "WF104"})
    description = "a trajectory of n states -> the initial state and two buffers used in turn"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _PingPong(TapedScope(module), target)

    def anchors(self, code: str) -> list[int]:
        """The uses of the aliased list: WF104 points at the step that reads and writes its buffers."""
        found = re.search(r"^\s*(\S+) = \[\1\[0\]\] \+ \[\1\[1 \+ i % 2\]", code, re.MULTILINE)
        if found is None:
            return []
        name = found.group(1)
        return [n for n in _lines_matching(code, f"{name}[") if n != code[: found.start()].count("\n") + 1]


# --- WF301: removed tape.zero() --------------------------------------------------------------


def _is_zeroing(stmt: cst.BaseStatement) -> bool:
    expr = _single_expr(stmt)
    if not isinstance(expr, cst.Call) or expr.args:
        return False
    name = call_name(expr)
    if not name or "." not in name:
        return False
    receiver, method = name.rsplit(".", 1)
    tapeish = "tape" in receiver.split(".")[-1].lower()
    return (method in ("zero", "reset") and tapeish) or (method == "zero_" and receiver.endswith(".grad"))


class _DropZero(BlockTransformer):
    def is_site(self, body: Sequence[cst.BaseStatement], index: int) -> bool:
        return _is_zeroing(body[index])

    def edit(self, body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
        rest = list(body[:index]) + list(body[index + 1:])
        return rest or [cst.SimpleStatementLine([cst.Pass()])]


class DropZero(Operator):
    name = "drop-zero"
    rule = "WF301"
    accepts = frozenset({"WF301"})
    description = "tape.zero() / tape.reset() / x.grad.zero_() removed"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _DropZero(TapedScope(module), target)

    def anchors(self, code: str) -> list[int]:
        return _lines_matching(code, ".backward(")


# --- WF401 / WF106 / WF702: kernel-language mutations ----------------------------------------


def _array_params(fn: cst.FunctionDef) -> dict[str, str]:
    """Array parameters of a kernel, with their annotation's code."""
    out = {}
    for p in fn.params.params:
        if p.annotation is not None and "array" in code_of(p.annotation.annotation):
            out[p.name.value] = code_of(p.annotation.annotation)
    return out


class _KernelTransformer(BlockTransformer):
    def __init__(self, scope: TapedScope, target: int) -> None:
        super().__init__(scope, target)
        self.params: list[dict[str, str]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self.params.append(_array_params(node))

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.params.pop()
        return super().leave_FunctionDef(original, updated)

    def _store(self, stmt: cst.BaseStatement) -> tuple[cst.Assign, cst.Subscript] | None:
        """A store ``P[idx] = value`` into an array parameter of the current taped kernel."""
        assign = _single_assign(stmt)
        if not self.in_taped_kernel or assign is None or len(assign.targets) != 1:
            return None
        target = assign.targets[0].target
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value in self.params[-1]:
            return assign, target
        return None


class _InplaceMul(_KernelTransformer):
    def is_site(self, body: Sequence[cst.BaseStatement], index: int) -> bool:
        store = self._store(body[index])
        return store is not None and isinstance(store[0].value, cst.BinaryOperation) and isinstance(
            store[0].value.operator, (cst.Multiply, cst.Divide)
        )

    def edit(self, body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
        stmt = body[index]
        assert isinstance(stmt, cst.SimpleStatementLine)
        assign, target = self._store(stmt)  # type: ignore[misc]
        value = assign.value
        assert isinstance(value, cst.BinaryOperation)
        op: cst.BaseAugOp = cst.MultiplyAssign() if isinstance(value.operator, cst.Multiply) else cst.DivideAssign()
        right = value.right
        aug = stmt.with_changes(body=[cst.AugAssign(target=target, operator=op, value=right)])
        if code_of(value.left) == code_of(target):
            return [*body[:index], aug, *body[index + 1:]]
        first = stmt.with_changes(body=[assign.with_changes(value=value.left)], trailing_whitespace=cst.TrailingWhitespace())
        return [*body[:index], first, aug.with_changes(leading_lines=[]), *body[index + 1:]]


class InplaceMul(Operator):
    name = "inplace-mul"
    rule = "WF401"
    accepts = frozenset({"WF401"})
    description = "out[i] = a * b -> out[i] = a; out[i] *= b (and /=) in a taped kernel"
    mark_last = True

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _InplaceMul(TapedScope(module), target)


class _InplaceMulOperand(_InplaceMul):
    """``out[i] = a * b`` -> ``out[i] = b; out[i] *= a``: the *left* operand becomes the in-place
    multiplier. Warp's adjoint of ``out[i] *= a`` reads ``out[i]`` after the store, so the gradient
    of the multiplier is wrong (measured on 1.19: d/da of ``out[i] = b; out[i] *= a`` comes out as
    ``a * b`` instead of ``b``) while that of the value is right; the sites of ``inplace-mul`` (whose
    multiplier is the right operand) mostly multiply by a constant (``dt``, a scale), whose wrong
    gradient nobody reads. Sites: products whose left operand is not a number."""

    def is_site(self, body: Sequence[cst.BaseStatement], index: int) -> bool:
        if not super().is_site(body, index):
            return False
        value = self._store(body[index])[0].value  # type: ignore[index]
        return isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply) and not isinstance(
            value.left, (cst.Integer, cst.Float)
        )

    def edit(self, body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
        stmt = body[index]
        assert isinstance(stmt, cst.SimpleStatementLine)
        assign, target = self._store(stmt)  # type: ignore[misc]
        value = assign.value
        assert isinstance(value, cst.BinaryOperation)
        first = stmt.with_changes(body=[assign.with_changes(value=value.right)], trailing_whitespace=cst.TrailingWhitespace())
        aug = stmt.with_changes(body=[cst.AugAssign(target=target, operator=cst.MultiplyAssign(), value=value.left)],
                                leading_lines=[])
        return [*body[:index], first, aug, *body[index + 1:]]


class InplaceMulOperand(Operator):
    name = "inplace-mul-operand"
    rule = "WF401"
    accepts = frozenset({"WF401"})
    description = "out[i] = a * b -> out[i] = b; out[i] *= a in a taped kernel (a's gradient reads the product)"
    mark_last = True

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _InplaceMulOperand(TapedScope(module), target)


class _KernelRmw(_KernelTransformer):
    """``y[i] = f(x[i])`` -> the same, then ``x[i] = y[i]``: the kernel overwrites an element of an input
    it read (the result written back in place). The forward is unchanged when nothing later in the
    forward reads ``x``; the adjoint of this kernel then replays against the overwritten input."""

    def _read(self, stmt: cst.BaseStatement) -> tuple[cst.Subscript, cst.Subscript] | None:
        """(read ``x[idx]``, store target ``y[idx]``): another array parameter of the same type, same index."""
        store = self._store(stmt)
        if store is None:
            return None
        assign, target = store
        index = code_of(target.slice[0]) if len(target.slice) == 1 else None
        for sub in m.findall(assign.value, m.Subscript(value=m.Name())):
            assert isinstance(sub, cst.Subscript)
            name, stored = sub.value.value, target.value.value  # type: ignore[union-attr]
            params = self.params[-1]
            if name in params and name != stored and params[name] == params[stored] and len(sub.slice) == 1:
                if code_of(sub.slice[0]) == index:
                    return sub, target
        return None

    def is_site(self, body: Sequence[cst.BaseStatement], index: int) -> bool:
        return self._read(body[index]) is not None

    def edit(self, body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
        found = self._read(body[index])
        assert found is not None
        read, target = found
        writeback = cst.parse_statement(f"{code_of(read)} = {code_of(target)}\n")
        return [*body[: index + 1], writeback, *body[index + 1:]]


class KernelRmw(Operator):
    name = "kernel-rmw"
    rule = "WF106"
    accepts = frozenset({"WF106"})
    description = "a taped kernel writes its result back into the input element it read: y[i] = f(x[i]); x[i] = y[i]"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _KernelRmw(TapedScope(module), target)


class _SqrtDot(SiteTransformer):
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not self.in_taped_kernel or call_name(updated) != "wp.length" or len(updated.args) != 1:
            return updated
        if not self.take():
            return updated
        v = code_of(updated.args[0].value)
        return cst.parse_expression(f"wp.sqrt(wp.dot({v}, {v}))")


class SqrtDot(Operator):
    name = "sqrt-dot"
    rule = "WF702"
    accepts = frozenset({"WF702"})
    description = "wp.length(v) -> wp.sqrt(wp.dot(v, v)) in a taped kernel or func"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _SqrtDot(TapedScope(module), target)


class _AdjointAssign(SiteTransformer):
    def leave_AugAssign(self, original: cst.AugAssign, updated: cst.AugAssign) -> cst.BaseSmallStatement:
        fn = self.fn_stack[-1] if self.fn_stack else None
        if fn is None or not isinstance(updated.operator, cst.AddAssign):
            return updated
        if not (isinstance(updated.target, cst.Subscript) and dotted(updated.target.value) == "wp.adjoint"):
            return updated
        if not self.take():
            return updated
        return cst.Assign(targets=[cst.AssignTarget(updated.target)], value=updated.value)


class AdjointAssign(Operator):
    name = "adjoint-assign"
    rule = "WF801"
    accepts = frozenset({"WF801"})
    description = "wp.adjoint[x] += g -> wp.adjoint[x] = g in a @wp.func_grad"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _AdjointAssign(TapedScope(module), target)


# --- WF201 / WF501: allocation flags ---------------------------------------------------------


def _requires_grad_arg(call: cst.Call) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword and arg.keyword.value == "requires_grad" and m.matches(arg.value, m.Name("True")):
            return arg
    return None


def _loud_without_grad(source: str, owner: str) -> bool:
    """Warp (or Python) stops the program itself when ``owner`` loses ``requires_grad``: it is a backward's
    seed ("Scalar loss arrays should have requires_grad=True") or the program reads its ``.grad`` (None:
    ``.fill_`` / ``wp.copy`` / an optimizer fail). Such a mutant is a loud error, not a silent gradient bug."""
    name = re.escape(owner)
    grad = re.search(name + r"(\[[^\]\n]*\])?\.grad\b", source)
    seed = re.search(r"\.backward\(\s*(loss\s*=\s*)?" + name + r"\s*[,)]|grads\s*=\s*\{\s*" + name + r"\s*:", source)
    return bool(grad or seed)


class _DropRequiresGrad(SiteTransformer):
    def __init__(self, scope: TapedScope, target: int, source: str) -> None:
        super().__init__(scope, target)
        self.source = source
        self.owners: list[str | None] = []  # the array an allocation is assigned to or appended to

    def visit_Assign(self, node: cst.Assign) -> None:
        self.owners.append(code_of(node.targets[0].target) if len(node.targets) == 1 else None)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        self.owners.pop()
        return updated

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "append":
            self.owners.append(code_of(node.func.value))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if isinstance(original.func, cst.Attribute) and original.func.attr.value == "append":
            self.owners.pop()
        if not is_wp_call(updated, ALLOCATORS):
            return updated
        arg = _requires_grad_arg(updated)
        owner = self.owners[-1] if self.owners else None
        if arg is None or owner is not None and _loud_without_grad(self.source, owner) or not self.take():
            return updated
        args = [a for a in updated.args if a is not arg]
        last = args[-1]
        args[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=args)


class DropRequiresGrad(Operator):
    name = "drop-requires-grad"
    rule = "WF201"
    accepts = frozenset({"WF201"})
    description = ("requires_grad=True dropped from a wp.zeros/empty/array allocation (not from a backward's seed "
                   "or an array whose .grad the program reads: Warp stops those itself)")

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _DropRequiresGrad(TapedScope(module), target, module.code)


class _RetainGrad(SiteTransformer):
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not is_wp_call(updated, ALLOCATORS) or _requires_grad_arg(updated) is None or not self.take():
            return updated
        args = list(updated.args)
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(cst.Arg(keyword=cst.Name("retain_grad"), value=cst.Name("True"), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
        return updated.with_changes(args=args)


class RetainGrad(Operator):
    name = "retain-grad"
    rule = "WF501"
    accepts = frozenset({"WF501"})
    description = "retain_grad=True added to a requires_grad allocation"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _RetainGrad(TapedScope(module), target)


# --- WF302 / WF303: statements moved relative to the tape ------------------------------------


def _backward_of(stmt: cst.BaseStatement) -> str | None:
    """The receiver of ``<receiver>.backward(...)``."""
    expr = _single_expr(stmt)
    if isinstance(expr, cst.Call):
        name = call_name(expr)
        if name and name.endswith(".backward"):
            return name[: -len(".backward")]
    return None


def _moved_sites(body: Sequence[cst.BaseStatement]) -> list[tuple[int, int, int]]:
    """(with index, backward index, moved index): a call statement right after a tape's backward."""
    out = []
    for w, stmt in enumerate(body):
        if not (isinstance(stmt, cst.With) and is_tape_with(stmt)):
            continue
        for b in range(w + 1, len(body) - 1):
            if _backward_of(body[b]) is None:
                continue
            nxt = body[b + 1]
            if isinstance(_single_expr(nxt), cst.Call) and not _is_zeroing(nxt) and _backward_of(nxt) is None:
                out.append((w, b, b + 1))
            break
    return out


class _MoveStatement(BlockTransformer):
    into_tape = True

    def is_site(self, body: Sequence[cst.BaseStatement], index: int) -> bool:
        return any(s[2] == index for s in _moved_sites(body))

    def edit(self, body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
        w, b, k = next(s for s in _moved_sites(body) if s[2] == index)
        moved = body[k].with_changes(leading_lines=[])
        out = list(body)
        del out[k]
        if self.into_tape:
            block = out[w]
            assert isinstance(block, cst.With) and isinstance(block.body, cst.IndentedBlock)
            out[w] = block.with_changes(body=block.body.with_changes(body=[*block.body.body, moved]))
        else:
            out.insert(b, moved)
        return out


class _IntoTape(_MoveStatement):
    into_tape = True


class _BeforeBackward(_MoveStatement):
    into_tape = False


class StepInTape(Operator):
    name = "step-in-tape"
    rule = "WF302"
    accepts = frozenset({"WF302"})
    description = "the statement after tape.backward (optimizer step, metric) moved into the with-tape block"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _IntoTape(TapedScope(module), target)


def _tape_method(fn: cst.FunctionDef) -> int | None:
    """Index of the ``with <tape>:`` statement of a method whose own body runs the tape and its backward."""
    if not isinstance(fn.body, cst.IndentedBlock):
        return None
    body = fn.body.body
    for w, stmt in enumerate(body):
        if isinstance(stmt, cst.With) and is_tape_with(stmt) and any(_backward_of(b) for b in body[w + 1:]):
            return w
    return None


def _calls_method(stmt: cst.BaseStatement, name: str) -> bool:
    return any(simple_callee(c) == name for c in m.findall(stmt, m.Call()))  # type: ignore[arg-type]


class _StepIntoMethod(SiteTransformer):
    """In a class, ``self.forward_backward()`` followed by an optimizer launch that reads a ``.grad``:
    the launch moves to the end of the with-tape block inside ``forward_backward`` (local names it
    uses are replaced by the expressions they were assigned)."""

    def _sites(self, cls: cst.ClassDef) -> list[tuple[str, int, str]]:
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        taped = {name for name, fn in methods.items() if _tape_method(fn) is not None}
        out = []
        for name, fn in methods.items():
            body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
            for i, stmt in enumerate(body):
                callee = next((t for t in taped if t != name and _calls_method(stmt, t)), None)
                if callee is None:
                    continue
                for j in range(i + 1, len(body)):
                    launch = _launch(body[j])
                    if launch is not None and ".grad" in code_of(launch):
                        out.append((name, j, callee))
                        break
                break
        return out

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        for name, j, callee in self._sites(updated):
            if self.take():
                return self._move(updated, name, j, callee)
        return updated

    @staticmethod
    def _move(cls: cst.ClassDef, name: str, j: int, callee: str) -> cst.ClassDef:
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        src = methods[name]
        body = list(src.body.body)
        moved = body[j]
        for stmt in body[:j]:
            assign = _single_assign(stmt)
            if assign and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
                local = assign.targets[0].target.value
                value = assign.value
                moved = moved.visit(_Rename(local, value))
        del body[j]
        new_src = src.with_changes(body=src.body.with_changes(body=body))
        dst = methods[callee]
        w = _tape_method(dst)
        assert w is not None
        dst_body = list(dst.body.body)
        block = dst_body[w]
        assert isinstance(block, cst.With) and isinstance(block.body, cst.IndentedBlock)
        dst_body[w] = block.with_changes(
            body=block.body.with_changes(body=[*block.body.body, moved.with_changes(leading_lines=[])])
        )
        new_dst = dst.with_changes(body=dst.body.with_changes(body=dst_body))
        replaced = [new_src if s is src else new_dst if s is dst else s for s in cls.body.body]
        return cls.with_changes(body=cls.body.with_changes(body=replaced))


class _Rename(cst.CSTTransformer):
    def __init__(self, name: str, value: cst.BaseExpression) -> None:
        super().__init__()
        self.name, self.value = name, value

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.value.deep_clone() if updated.value == self.name else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        # keep attribute names (``x.grad``'s ``grad``) untouched: only the receiver is renamed
        if isinstance(original.attr, cst.Name) and original.attr.value == self.name:
            return updated.with_changes(attr=original.attr)
        return updated

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


class StepIntoMethod(Operator):
    name = "step-into-taped-method"
    rule = "WF302"
    accepts = frozenset({"WF302"})
    description = "the optimizer launch after self.forward_backward() moved into that method's with-tape block"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _StepIntoMethod(TapedScope(module), target)


class WriteBeforeBackward(Operator):
    name = "write-before-backward"
    rule = "WF303"
    accepts = frozenset({"WF303"})
    description = "the statement after tape.backward moved between the tape block and the backward"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _BeforeBackward(TapedScope(module), target)


# --- WF105 / WF502 / WF101: host-side launch mutations ---------------------------------------


def _launch(stmt: cst.BaseStatement) -> cst.Call | None:
    expr = _single_expr(stmt)
    if isinstance(expr, cst.Call) and call_name(expr) == "wp.launch":
        return expr
    return None


def _launch_inputs(call: cst.Call) -> list[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword and arg.keyword.value == "inputs" and isinstance(arg.value, (cst.List, cst.Tuple)):
            return [
                el.value for el in arg.value.elements
                if isinstance(el.value, (cst.Name, cst.Attribute, cst.Subscript))
                and not code_of(el.value).endswith(".grad")
            ]
    return []


class _ZeroRead(BlockTransformer):
    def _targets(self, stmt: cst.BaseStatement) -> list[cst.BaseExpression]:
        call = _launch(stmt)
        return _launch_inputs(call) if call is not None and self.in_taped_host else []

    def _sites(self, body: Sequence[cst.BaseStatement]) -> list[tuple[int, cst.BaseExpression]]:
        return [(i, e) for i, s in enumerate(body) for e in self._targets(s)]

    def _rewrite(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement] | None:
        for index, expr in self._sites(body):
            if self.take():
                zero = cst.parse_statement(f"{code_of(expr)}.zero_()\n")
                return [*body[: index + 1], zero, *body[index + 1:]]
        return None


class ZeroRead(Operator):
    name = "zero-read"
    rule = "WF105"
    accepts = frozenset({"WF105"})
    description = "x.zero_() right after a taped launch read x"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _ZeroRead(TapedScope(module), target)


class _DuplicateLaunch(BlockTransformer):
    def is_site(self, body: Sequence[cst.BaseStatement], index: int) -> bool:
        return self.in_taped_host and _launch(body[index]) is not None

    def edit(self, body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
        repeat = body[index].deep_clone().with_changes(leading_lines=[])
        return [*body[: index + 1], repeat, *body[index + 1:]]


class DuplicateLaunch(Operator):
    name = "duplicate-launch"
    rule = "WF502"
    accepts = frozenset({"WF502"})
    description = "a taped wp.launch repeated on the next line"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _DuplicateLaunch(TapedScope(module), target)


class _CopyWriteback(BlockTransformer):
    def is_site(self, body: Sequence[cst.BaseStatement], index: int) -> bool:
        assign = _single_assign(body[index])
        if not self.in_taped_host or assign is None or len(assign.targets) != 1:
            return False
        target, value = assign.targets[0].target, assign.value
        return (
            isinstance(target, (cst.Name, cst.Attribute, cst.Subscript))
            and isinstance(value, (cst.Name, cst.Attribute, cst.Subscript))
            and code_of(target) != code_of(value)
        )

    def edit(self, body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
        stmt = body[index]
        assign = _single_assign(stmt)
        assert assign is not None and isinstance(stmt, cst.SimpleStatementLine)
        copy = cst.parse_statement(f"wp.copy({code_of(assign.targets[0].target)}, {code_of(assign.value)})\n")
        assert isinstance(copy, cst.SimpleStatementLine)
        return [*body[:index], stmt.with_changes(body=copy.body), *body[index + 1:]]


class CopyWriteback(Operator):
    name = "copy-writeback"
    rule = "WF101"
    accepts = frozenset({"WF101"})
    description = "a rebinding dst = src of taped buffers -> wp.copy(dst, src)"

    def transformer(self, module: cst.Module, target: int) -> SiteTransformer:
        return _CopyWriteback(TapedScope(module), target)


from bench.mutants.perframe import PerFrameTape, PerWindowBackward  # noqa: E402  (builds on the classes above)

OPERATORS: list[Operator] = [
    AliasStep(), ListAlias(), PingPong(), DropZero(), InplaceMul(), InplaceMulOperand(), KernelRmw(), DropRequiresGrad(), StepInTape(),
    StepIntoMethod(), WriteBeforeBackward(), CopyWriteback(), ZeroRead(), RetainGrad(), DuplicateLaunch(), SqrtDot(), AdjointAssign(),
    PerFrameTape(), PerWindowBackward(),
]

BY_NAME: dict[str, Operator] = {op.name: op for op in OPERATORS}


def select(names: Callable[[Operator], bool] | None = None) -> list[Operator]:
    return [op for op in OPERATORS if names is None or names(op)]
