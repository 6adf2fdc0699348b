"""Host expressions: names, attributes, items, literals, operators and the tests the interpreter can decide."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

from warpfix.model.grad_reads import grad_owner
from warpfix.model.host.limits import CONCAT_PREFIX, MAX_CONCAT, MAX_EAGER_COMPREHENSION
from warpfix.model.host.syntax import _binop, _is_name_chain, _is_property, _is_static, _text
from warpfix.model.host.values import DICT, Val, Varies, _Frame, _SameItem, combine, decided
from warpfix.model.source import SourceFile

_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}


class Expressions:
    """Expressions of :class:`~warpfix.model.host.interpreter.HostInterpreter` (a mixin)."""

    # ------------------------------------------------------------------ expressions
    def index_key(self, sl: ast.expr, frame: _Frame) -> str:
        if isinstance(sl, ast.Slice):
            return "slice:" + _text(sl)
        v = self.eval(sl, frame)
        if v.kind in ("int", "const") and isinstance(v.value, (int, str)):
            return str(v.value)
        if isinstance(sl, ast.Tuple):
            return ",".join(self.index_key(e, frame) for e in sl.elts)
        # An index the interpreter cannot evaluate (`xs[min(t, n)]` with `t += 1` per step) names the
        # same element within one loop pass, but may name another one in the next pass.
        passes = ",".join(f"{loop}.{k}" for loop, k in self.loop_stack)
        return f"expr:{_text(sl)}@{passes}" if passes else "expr:" + _text(sl)

    def eval(self, e: ast.expr | None, frame: _Frame) -> Val:
        if e is None:
            return self.new("None", "const")
        src = frame.src
        if isinstance(e, ast.Constant):
            return self.new(repr(e.value), "int" if isinstance(e.value, int) and not isinstance(e.value, bool)
                            else "const", value=e.value)
        if isinstance(e, ast.Name):
            v = frame.lookup(e.id)
            if v is None:
                v = self.module_global(src, e.id)
            return v
        if isinstance(e, ast.Attribute):
            if src.warp_name(e) is not None:
                return self.new(_text(e), "const")
            owner = self.eval(e.value, frame)
            if owner.kind == "object" and owner.cls is not None and e.attr not in owner.attrs:
                found = self.find_method(owner.cls, e.attr)
                if found is not None and _is_property(found[1]):
                    return self.inline(found[0], found[1], [owner], {}, e, caller_src=src, bound_self=True)
                if found is not None and not _is_static(found[1]):
                    # a bound method handed on (``run(n, example.step)``): calling it runs the method
                    return self.new(f"{owner.label}.{e.attr}", "func", func=found, attrs={"__self__": owner})
            elif owner.kind == "unknown" and e.attr in self.property_names and e.attr not in owner.attrs:
                # maybe a computed property of a project class: not one stable value
                return self.new(f"{owner.label}.{e.attr}")
            v = self.attr(owner, e.attr)
            if e.attr == "grad":
                self.grad_read(v, e, e.value, src)
            return v
        if isinstance(e, ast.Subscript):
            owner_node = grad_owner(e)
            if owner_node is not None:  # tape.gradients[x]: x.grad
                return self.grad_read(self.attr(self.eval(owner_node, frame), "grad"), e, owner_node, src)
            base = self.eval(e.value, frame)
            if isinstance(e.slice, ast.Slice) and base.kind == "list":
                sliced = self.list_slice(base, e.slice, frame)
                if sliced is not None:
                    return sliced
            return self.item(base, self.index_key(e.slice, frame))
        if isinstance(e, ast.Call):
            return self.call(e, frame)
        if isinstance(e, (ast.List, ast.Tuple)):
            v = self.new("list", "list")
            i = 0
            for elt in e.elts:
                if isinstance(elt, ast.Starred):
                    self.eval(elt.value, frame)
                    continue
                v.items[str(i)] = self.eval(elt, frame)
                i += 1
            if not any(isinstance(elt, ast.Starred) for elt in e.elts):
                v.length = i
            return v
        if isinstance(e, ast.ListComp):
            v = self.new("list", "list")
            v.factory = (e.elt, {**frame.locals}, src)
            iters = [self.eval(gen.iter, frame) for gen in e.generators]
            gen = e.generators[0]
            if (len(e.generators) == 1 and not gen.ifs and isinstance(e.elt, ast.Name)
                    and e.elt.id not in {n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name)}):
                only = self.eval(e.elt, frame)  # ``[buf for _ in range(n)]``: every slot is the one ``buf``
                if only.kind in ("array", "object"):
                    self.repeat_alias(only, e, src)
            if len(e.generators) == 1 and not gen.ifs and iters[0].kind == "list":
                over = self.dict_view(iters[0], "keys") if iters[0].label == DICT else iters[0]
                if over.length is not None and over.length <= MAX_EAGER_COMPREHENSION:
                    # ``[p.grad for p in params.values()]``: one element per item of a list of known length
                    scope = _Frame(src, {**frame.locals}, frame.self_val, fn=frame.fn)
                    for k in range(over.length):
                        self.bind(gen.target, self.item(over, str(k)), scope)
                        v.items[str(k)] = self.eval(e.elt, scope)
                    v.factory, v.length = None, over.length
                    return v
            if (
                len(e.generators) == 1
                and not gen.ifs
                and isinstance(gen.iter, ast.Call)
                and isinstance(gen.iter.func, ast.Name)
                and gen.iter.func.id == "range"
                and len(gen.iter.args) == 1
            ):
                n = self.eval(gen.iter.args[0], frame)
                if n.kind == "int" and isinstance(n.value, int):
                    v.length = n.value
                if isinstance(gen.target, ast.Name):
                    v.factory_var = gen.target.id  # element k is ``elt`` at ``i = k``, whether n is known or not
            return v
        if isinstance(e, ast.Dict):
            known = all(isinstance(k, ast.Constant) for k in e.keys)  # no ``**spread``, no computed key
            v = self.new(DICT if known else "dict", "list")
            for k, val in zip(e.keys, e.values, strict=True):
                key = k.value if isinstance(k, ast.Constant) else None  # ast.literal_eval's, without its closures' cycle
                vv = self.eval(val, frame)
                if key is not None:
                    v.items[str(key)] = vv
            return v
        if isinstance(e, ast.BinOp):
            left, right = self.eval(e.left, frame), self.eval(e.right, frame)
            if left.kind == "int" and right.kind == "int":
                r = _binop(e.op, left.value, right.value)
                if r is not None:
                    op = e.op
                    return self.known_int(_text(e), r, (left, right), lambda a, b: _binop(op, a, b))
            if (isinstance(e.op, ast.Add) and left.kind == right.kind == "list" and left.length is not None
                    and right.length is not None and left.length + right.length <= MAX_CONCAT):
                v = self.new("list", "list", length=left.length + right.length)  # ``[s0] + [s[i] for i in ...]``
                for k in range(left.length):
                    v.items[str(k)] = self.item(left, str(k))
                for k in range(right.length):
                    v.items[str(left.length + k)] = self.item(right, str(k))
                return v
            if (isinstance(e.op, ast.Add) and left.kind == right.kind == "list" and left.length is not None
                    and right.length is None and right.factory is not None and right.factory_var is not None):
                # ``[s0] + [s[1 + i % 2] for i in range(len(s) - 1)]`` of unknown length: the first elements,
                # taken now (the comprehension reads the list this assignment rebinds)
                v = self.new("list", "list")
                for k in range(left.length):
                    v.items[str(k)] = self.item(left, str(k))
                for k in range(CONCAT_PREFIX):
                    v.items[str(left.length + k)] = self.item(right, str(k))
                return v
            if isinstance(e.op, ast.Mult) and left.kind == "list" and len(left.items) == 1:
                v = self.new("list", "list")
                only = left.items["0"]
                v.items = _SameItem(only)  # type: ignore[assignment]
                if only.kind in ("array", "object", "unknown") and isinstance(e.left, (ast.List, ast.Tuple)):
                    self.repeat_alias(only, e, src)
                return v
            return self.new(_text(e))
        if isinstance(e, ast.UnaryOp):
            operand = self.eval(e.operand, frame)
            if isinstance(e.op, ast.USub) and operand.kind == "int" and isinstance(operand.value, int):
                return self.known_int(_text(e), -operand.value, (operand,), operator.neg)
            return self.new(_text(e))
        if isinstance(e, ast.IfExp):
            known = self.test_truth(e.test, frame)
            if known is not None:  # ``x if s == 0 else y`` with ``s`` an unrolled loop index
                return self.eval(e.body if known else e.orelse, frame)
            a = self.eval(e.body, frame)
            self.eval(e.orelse, frame)
            return a
        if isinstance(e, ast.Yield) and self.yield_handlers and self.func_stack \
                and self.yield_handlers[-1][0] == self.func_stack[-1]:
            self.yield_handlers[-1][1](self.eval(e.value, frame), frame.src.span(e))
            return self.new("None", "const")
        if isinstance(e, (ast.BoolOp, ast.Compare, ast.JoinedStr, ast.Lambda, ast.GeneratorExp, ast.SetComp,
                          ast.DictComp, ast.Set, ast.Await, ast.Yield, ast.YieldFrom, ast.FormattedValue)):
            for child in ast.iter_child_nodes(e):
                if isinstance(child, ast.expr) and not isinstance(e, (ast.Lambda, ast.GeneratorExp)):
                    self.eval(child, frame)
            return self.new(_text(e)[:40])
        if isinstance(e, ast.NamedExpr):
            v = self.eval(e.value, frame)
            self.bind(e.target, v, frame)
            return v
        if isinstance(e, ast.Starred):
            return self.eval(e.value, frame)
        return self.new(type(e).__name__)

    def known_int(self, label: str, value: int, operands: tuple[Val, ...], fn: Callable) -> Val:
        """The int ``fn`` computes from the known ints ``operands`` (``value``); it varies between the passes
        of an unrolled loop (:attr:`varying`) where one of them does."""
        v = self.new(label, "int", value=value)
        varies = combine(fn, [o.value for o in operands], [self.varying.get(o.id) for o in operands])
        if varies is not None:
            self.varying[v.id] = varies
        return v

    def test_truth(self, test: ast.expr, frame: _Frame) -> bool | None:
        """The truth of a test, which this evaluates once (as Python would): comparisons of known ints
        (``frame >= FRAMES // 2``, chained ``0 <= t < n``), ``not`` and ``and``/``or`` of such tests; None
        when not known. A test that varies with an unrolled loop's counter is decided where every outcome
        it has over the loop's iterations is one it has at a pass the loop runs (:func:`decided`):
        ``frame >= FRAMES // 2`` over passes 0, 1, 2 and 23 of 24 is, ``frame == FRAMES // 2`` is not
        (both arms run, as for any undecided test)."""
        known = self.test_value(test, frame)
        return None if known is None else decided(*known)

    def test_value(self, test: ast.expr, frame: _Frame) -> tuple[bool, Varies | None] | None:
        """A test's truth now and how it varies between loop passes; None when not known."""
        if isinstance(test, ast.Compare):
            sides = [self.eval(test.left, frame), *(self.eval(c, frame) for c in test.comparators)]
            if not all(v.kind == "int" and type(v.value) is int for v in sides):
                return None
            parts = []
            for op, a, b in zip(test.ops, sides, sides[1:], strict=False):
                fn = _COMPARE.get(type(op))
                if fn is None:
                    return None
                parts.append((fn(a.value, b.value), combine(fn, [a.value, b.value],
                                                            [self.varying.get(a.id), self.varying.get(b.id)])))
            return _join(all, parts)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            known = self.test_value(test.operand, frame)
            return None if known is None else (not known[0], combine(operator.not_, [known[0]], [known[1]]))
        if isinstance(test, ast.BoolOp):
            decisive = isinstance(test.op, ast.Or)  # the operand value that decides the whole test
            parts = []
            for operand in test.values:
                known = self.test_value(operand, frame)
                if known is not None and known[1] is None and known[0] is decisive:
                    return decisive, None  # the rest is not evaluated
                parts.append(known)
            if any(p is None for p in parts):
                return None
            return _join(any if decisive else all, parts)  # type: ignore[arg-type]
        self.eval(test, frame)
        return None

    def known_flag(self, test: ast.expr, frame: _Frame) -> bool | None:
        """The truth of ``name`` / ``not name`` when the name holds a literal bool or a known int (a
        loop over ``(False, True)``, ``flag = True``); None otherwise. Only local names: an attribute
        may be set where the model does not look."""
        negate = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        name = test.operand if negate else test  # type: ignore[attr-defined]
        if not isinstance(name, ast.Name) or name.id not in frame.locals:
            return None
        v = frame.locals[name.id]
        if v.kind == "int" and v.id in self.varying:  # ``if t:``, ``t`` a loop counter
            known = decided(bool(v.value), combine(bool, [v.value], [self.varying[v.id]]))
            return None if known is None else known != negate
        if v.kind == "const" and isinstance(v.value, bool) or v.kind == "int" and isinstance(v.value, int):
            return (not v.value) if negate else bool(v.value)
        return None

    def none_test(self, test: ast.expr, frame: _Frame) -> bool | None:
        """False for ``name is None`` (True for ``is not None``) when the name holds a value a caller always
        hands over (:attr:`given`), or is a parameter of the function run now bound to an allocation or
        constructor the project made (``rollout(..., loss=loss)``); True (False) for such a parameter left at
        its ``None`` default; None otherwise."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot))
                and isinstance(test.left, ast.Name) and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None and test.left.id in frame.locals):
            return None
        v = frame.locals[test.left.id]
        if v.id in self.given:
            return isinstance(test.ops[0], ast.IsNot)
        fn = frame.fn
        if fn is None or test.left.id not in {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}:
            return None
        if v.fresh:
            return isinstance(test.ops[0], ast.IsNot)
        if v.kind == "const" and v.value is None and v.label == "None":
            return isinstance(test.ops[0], ast.Is)
        return None

    def same_buffer_test(self, test: ast.expr, frame: _Frame) -> bool | None:
        """``a.ptr != b.ptr`` / ``a is not b`` (and ``==`` / ``is``) when both sides are one buffer (a
        solver copying its result only when it went elsewhere); None when not known: two different
        buffers may still share memory. Only names and attribute chains are evaluated here: an
        undecided test is evaluated again as the ``if``'s, and a call must not run twice."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot))):
            return None
        sides = [test.left, test.comparators[0]]
        if all(isinstance(x, ast.Attribute) and x.attr == "ptr" for x in sides):
            sides = [x.value for x in sides]  # type: ignore[attr-defined]
        elif isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
            return None
        if not all(_is_name_chain(x) for x in sides):
            return None
        a, b = (self.eval(x, frame) for x in sides)
        if a.buf is None or b.buf is None or a.buf.root().id != b.buf.root().id or a.buf.view_of or b.buf.view_of:
            return None
        return isinstance(test.ops[0], (ast.Eq, ast.Is))

    def repeat_alias(self, only: Val, e: ast.BinOp | ast.ListComp, src: SourceFile) -> None:
        """``[x] * n`` (or ``[x for _ in range(n)]``) makes every slot one object: a ``rebind`` event whose
        reads are ``x``'s arrays, including the attributes of ``x`` first used later
        (``states[t].particle_q``)."""
        source = e.elt if isinstance(e, ast.ListComp) else e.left.elts[0]  # type: ignore[attr-defined]
        ev = self.emit("rebind", e, src, detail={"target": _text(e), "source": _text(source), "repeat": True,
                                                  "library_made": only.external})
        todo, seen = [only], set()
        while todo:
            v = todo.pop()
            if v.id in seen:
                continue
            seen.add(v.id)
            v.aliased_by += (ev,)
            if v.buf is not None:
                ev.reads.append(v.buf)
            todo.extend(v.attrs.values())

    def list_slice(self, base: Val, sl: ast.Slice, frame: _Frame) -> Val | None:
        """``xs[a:b]`` of a list with int bounds: a new list sharing the same element values."""
        lower = self.eval(sl.lower, frame) if sl.lower is not None else None
        upper = self.eval(sl.upper, frame) if sl.upper is not None else None
        if sl.step is not None:
            return None
        lo = lower.value if lower is not None and lower.kind == "int" else (0 if lower is None else None)
        hi = upper.value if upper is not None and upper.kind == "int" else (base.length if upper is None else None)
        if not isinstance(lo, int) or not isinstance(hi, int):
            return None
        if base.length is not None:
            lo, hi = slice(lo, hi).indices(base.length)[:2]
        if lo < 0 or hi < lo or hi - lo > 256:
            return None
        v = self.new(f"{base.label}[{lo}:{hi}]", "list", length=hi - lo)
        for j in range(hi - lo):
            v.items[str(j)] = self.item(base, str(lo + j))
        return v


def _join(how: Callable, parts: list[tuple[bool, Varies | None]]) -> tuple[bool, Varies | None]:
    """``all``/``any`` of tests' truths, now and as they vary."""
    now = how(p[0] for p in parts)
    return now, combine(lambda *xs: how(xs), [p[0] for p in parts], [p[1] for p in parts])
