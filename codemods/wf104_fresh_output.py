"""WF104: two buffers swapped in a loop on one tape (``a, b = b, a``).

Step N+1 writes the buffer step N read. The rewrite allocates a fresh output per step:
``b = wp.empty_like(b)`` just before the statement that writes ``b`` in the loop (a
``wp.launch`` with ``b`` in its ``outputs`` list, or a ``wp.copy(b, ...)``); the swap
stays, so the names still advance.

The span's line holds the swap, or the writing launch itself (for ``states[i % 2]``
style ping-pong: then ``states[(i + 1) % 2] = wp.empty_like(states[(i + 1) % 2])`` goes
before it).

A list of buffers rebound to a rotation of its own slots (``states = [states[0]] +
[states[1 + i % 2] for i in range(len(states) - 1)]``: every step writes a slot an earlier
step read), where the same function first built that list with one constructor call per slot
(``states = [make() for _ in range(n)]``), gets one ``make()`` per rotated slot again
(``[make() for i in ...]``): fresh buffers built the way the program built them. This holds for
the argument ``data["arg"]`` names (``states[t + 1].q``) whatever statement the span is on.

A library step writing a member of one of two states swapped in its loop (``solver.step(s0, s1, ...)``
then ``s0, s1 = s1, s0``, the finding's ``arg`` ``s1.particle_qd``) gets ``s1 = <the one call that built
it>`` (``self.model.state()``) before the step: a fresh state per step, built as the program built it.

Finding data (optional): ``written`` -- the name the loop writes into (default: the swapped
name that appears as a launch output or copy destination in the loop); ``arg`` -- with the
span on a launch, its output argument as written (default: its only output).
Skipped when the writing launch also reads the buffer, or when the write is not found.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from codemods._base import FindingCommand
from codemods._cst import call_name, launch_writes, walk
from warpfix.model.source import same_code

_PLACES = (cst.Name, cst.Attribute, cst.Subscript)


def _swap_places(node: cst.Assign) -> list[cst.BaseExpression] | None:
    if len(node.targets) != 1:
        return None
    target, value = node.targets[0].target, node.value
    if not (isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple)):
        return None
    left = [e.value for e in target.elements]
    right = [e.value for e in value.elements]
    if len(left) != 2 or len(right) != 2 or not all(isinstance(p, _PLACES) for p in left):
        return None
    if left[0].deep_equals(right[1]) and left[1].deep_equals(right[0]):
        return left
    return None


class FreshOutput(FindingCommand):
    DESCRIPTION = "WF104: allocate a fresh output buffer each step instead of ping-ponging two buffers."
    RULES = ("WF104",)
    DATA = {
        "written": "the swapped name the loop writes into",
        "arg": "the launch's output argument to allocate fresh (when the span is the launch)",
        "full_write": "False when the launch may leave elements of its output unwritten (a copy, not a fresh array)",
    }

    def describe_missing(self) -> str:
        return "no two-buffer swap `a, b = b, a`"

    def plan(self, tree: cst.Module) -> None:
        swaps = [a for a in self.nodes(self.tree, cst.Assign) if self._covers(a) and _swap_places(a) is not None]
        if swaps:
            self._plan_swap(swaps[0])
            return
        if self._fresh_rotated_slots() or self._fresh_state() or self._fresh_bound_place():
            return
        call = self.on_line(cst.Call, lambda c: bool(launch_writes(c)[0]))
        wanted = self.data["arg"] or self.data["written"]
        outputs, inputs = launch_writes(call)
        hit = next((o for o in outputs if wanted is None or same_code(self.code(o), wanted)), None)
        if hit is None or (wanted is None and len(outputs) != 1):
            raise self.not_applicable("cannot tell which output of the launch is the ping-pong buffer")
        self._fresh_before(call, hit, inputs)

    def _plan_swap(self, swap: cst.Assign) -> None:
        loop = self.enclosing(swap, (cst.For, cst.While))
        if loop is None:
            raise self.not_applicable("the swap is not in a loop")
        places = _swap_places(swap)
        wanted = self.data["written"] or self.data["arg"]
        if wanted:
            places = [p for p in places if same_code(self.code(p), wanted)]
        for call in self.nodes(loop.body, cst.Call):
            outputs, inputs = launch_writes(call)
            hit = next((p for p in places if any(o.deep_equals(p) for o in outputs)), None)
            if hit is not None:
                self._fresh_before(call, hit, inputs)
                return
        raise self.not_applicable("no launch or copy in the loop writes a swapped buffer")

    def _fresh_rotated_slots(self) -> bool:
        """``X = [...] + [X[k + i % m] for i in ...]`` after ``X = [make() for _ in ...]`` in one function:
        the rotated element becomes ``make()``. False when the finding's buffer is not such a list slot."""
        arg = self.data["arg"] or ""
        try:
            place = cst.parse_expression(arg) if arg else None
        except cst.ParserSyntaxError:
            return False
        while isinstance(place, (cst.Attribute, cst.Subscript)) and not (
            isinstance(place, cst.Subscript) and isinstance(place.value, _PLACES[:2])
        ):
            place = place.value
        if not isinstance(place, cst.Subscript):
            return False
        base = cst.Module(body=()).code_for_node(place.value)
        for assign in self.nodes(self.tree, cst.Assign):
            if len(assign.targets) != 1 or self.code(assign.targets[0].target) != base:
                continue
            rotated = [c for c in self.nodes(assign.value, cst.ListComp) if _rotates(c, base, self.code)]
            if not rotated:
                continue
            func = self.enclosing(assign, cst.FunctionDef)
            make = self._slot_constructor(func, assign, base) if func is not None else None
            if make is None:
                raise self.not_applicable(
                    f"`{base}` is rebound to a rotation of its own slots, but no constructor call builds "
                    "its slots before that in the same function")
            for comp in rotated:
                self.replace(comp.elt, make.deep_clone())
            self.context.scratch["summary"] = (
                f"fresh rotated slots: `{base}` rotated its own buffers; each rotated slot is a new "
                f"`{self.code(make)}`, as the list was built")
            return True
        return False

    def _fresh_state(self) -> bool:
        """``solver.step(s0, s1, ...)`` then ``s0, s1 = s1, s0`` in one loop, the finding's array a member of
        ``s1`` (``s1.particle_qd``): ``s1 = <the call that built it>`` (``self.model.state()``) before the
        step, so every step writes a fresh state built the way the program built it (WF103's fresh slots,
        for a swapped pair). False when the finding's call is no such step."""
        arg = str(self.data["arg"] or "")
        for call in self.nodes(self.tree, cst.Call):
            if not self._covers(call) or call_name(call) in ("launch", "copy"):
                continue
            place = next((a.value for a in call.args if isinstance(a.value, (cst.Name, cst.Attribute))
                          and (arg == self.code(a.value) or arg.startswith(self.code(a.value) + "."))), None)
            loop = self.enclosing(call, (cst.For, cst.While))
            if place is None or loop is None or not isinstance(loop.body, cst.IndentedBlock):
                continue
            body, stmt = list(loop.body.body), self.statement_of(call)
            text = self.code(place)
            swapped = stmt in body and any(
                isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Assign)
                and text in [self.code(p) for p in _swap_places(s.body[0]) or ()] for s in body[body.index(stmt) + 1:])
            if not swapped:
                continue
            make = self._built_by(text, loop)
            if make is None:
                raise self.not_applicable(f"`{text}` is swapped in the loop, but no one constructor call builds it")
            self.check_rebindable(place, stmt)
            self.insert_before(stmt, [self.statement(f"{text} = {self.code(make)}\n")])
            self.context.scratch["summary"] = (f"fresh state per step: `{text} = {self.code(make)}` before the step "
                                               "that writes it, as the program built it")
            return True
        return False

    def _fresh_bound_place(self) -> bool:
        """The finding's array is a local, or a member of one (``state_out.particle_qd``), that its function
        bound from a place outliving the call (``x_next = self.x[(t + 1) % 2]``): a fresh local would not
        reach the later readers of the place, so the place itself gets the fresh buffer just before that
        binding: ``P = wp.empty_like(P)`` for an array, ``P = make()`` for an object the program built
        with one constructor call ``make()`` (its list ``L = [make() for _ in ...]``, or ``P = make()``).
        False when the finding's name is not such a local."""
        root, _, member = str(self.data["arg"] or "").partition(".")
        if not root.isidentifier():
            return False
        func: cst.FunctionDef | cst.Module = max(
            (f for f in self.nodes(self.tree, cst.FunctionDef) if self._covers(f)),
            key=lambda f: self.pos(f).start.line, default=self.tree)
        binding = self._last_binding(func, root)
        if binding is None:
            return False
        assign, place = binding
        text = self.code(place)
        stmt = self.statement_of(assign)
        if any(self.nodes(place, cst.Call)):
            raise self.not_applicable(f"`{root}` is bound from `{text}`, which calls a function")
        start = self.pos(assign).start.line
        if any(a is not assign and self.pos(a).start.line < start and text in self._bound_places(a)
               for a in self._scope_assigns(func)):
            raise self.not_applicable(f"`{text}` is bound to another name too before line {start}")
        self.check_rebindable(place, stmt)
        if member:
            make = self._constructor_of(place, func)
        else:
            for call in self.nodes(func, cst.Call):
                outputs, inputs = launch_writes(call)
                if self.pos(call).start.line > start and any(self.code(o) == root for o in outputs) and any(
                        self.code(i) == root for i in inputs):
                    raise self.not_applicable(f"the launch at line {self.pos(call).start.line} also reads {root}")
            make = self.expression(f"{self.warp_alias()}.empty_like({text})")
        self.insert_before(stmt, [self.statement(f"{text} = {self.code(make)}\n")])
        self.context.scratch["summary"] = (f"fresh place per step: `{root}` is bound from `{text}`, which gets "
                                           f"a new `{self.code(make)}` before that binding")
        return True

    def _bound_places(self, assign: cst.Assign) -> list[str]:
        """The value texts ``assign`` binds (the elements of a tuple value one by one)."""
        value = assign.value
        values = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        return [self.code(v) for v in values]

    def _scope_assigns(self, scope: cst.CSTNode) -> list[cst.Assign]:
        """The assignments of ``scope`` itself (a function, the module), not of the functions, classes and
        lambdas nested in it."""
        nested = [n for n in self.nodes(scope, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) if n is not scope]
        inner = {id(a) for n in nested for a in self.nodes(n, cst.Assign)}
        return [a for a in self.nodes(scope, cst.Assign) if id(a) not in inner]

    def _last_binding(self, func: cst.CSTNode, name: str) -> tuple[cst.Assign, cst.BaseExpression] | None:
        """The last ``name = P`` (or ``a, name = u, P``) in the scope ``func`` up to the finding's line, with
        ``P`` a subscript or attribute; None when the last binding is anything else."""
        found = None
        for assign in self._scope_assigns(func):
            if self.pos(assign).start.line > (self.line or 0) or len(assign.targets) != 1:
                continue
            target, value = assign.targets[0].target, assign.value
            pairs = [(target, value)]
            if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(
                    value.elements):
                pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements, strict=True)]
            for t, v in pairs:
                if isinstance(t, cst.Name) and t.value == name and (
                        found is None or self.pos(assign).start.line >= self.pos(found[0]).start.line):
                    found = (assign, v)
        if found is None or not isinstance(found[1], (cst.Subscript, cst.Attribute)):
            return None
        return found

    def _constructor_of(self, place: cst.BaseExpression, func: cst.CSTNode) -> cst.Call:
        """The one call that builds what ``place`` holds (``self.model.state()`` of ``self.states = [
        self.model.state() for _ in range(2)]`` for ``self.states[i % 2]``), when it can run in ``func``:
        built in ``func`` itself, or from ``self`` (in a method of the same class) and the module's own
        names."""
        subscript = isinstance(place, cst.Subscript)
        text = self.code(place.value) if subscript else self.code(place)
        built = [a for a in self.nodes(self.tree, cst.Assign)
                 if len(a.targets) == 1 and self.code(a.targets[0].target) == text]
        value = built[0].value if len(built) == 1 else None
        if subscript and isinstance(value, cst.ListComp) and not any(
                isinstance(n, cst.Name) and n.value in _comp_names(value) for n in self.nodes(value.elt, cst.Name)):
            value = value.elt
        if not isinstance(value, cst.Call) or (subscript and value is built[0].value) or not all(
                isinstance(a.value, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.SimpleString))
                for a in value.args):
            raise self.not_applicable(f"no one constructor call builds what `{self.code(place)}` holds")
        home = self.enclosing(built[0], cst.FunctionDef) or self.tree
        roots = {self.code(n) for n in self.nodes(value, cst.Name) if not isinstance(self.parent(n), cst.Attribute)
                 or self.parent(n).value is n} - _module_names(self.tree)
        same_class = roots <= {"self"} and (
            "self" not in roots or self.enclosing(home, cst.ClassDef) is self.enclosing(func, cst.ClassDef) is not None)
        if home is not func and not same_class:
            raise self.not_applicable(f"`{self.code(value)}` builds `{text}` where its names are not those here")
        return value

    def _built_by(self, text: str, loop: cst.CSTNode) -> cst.Call | None:
        """The one call the file assigns to ``text`` outside ``loop`` (``self.state_1 = self.model.state()``)
        when its arguments are literals or attribute chains; None when there is none or more than one."""
        outside = [a for a in self.nodes(self.tree, cst.Assign)
                   if len(a.targets) == 1 and self.code(a.targets[0].target) == text
                   and not any(n is a for n in self.nodes(loop, cst.Assign))]
        if len(outside) != 1 or not isinstance(outside[0].value, cst.Call):
            return None
        make = outside[0].value
        if not all(isinstance(a.value, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.SimpleString))
                   for a in make.args):
            return None
        return make

    def _slot_constructor(self, func: cst.FunctionDef, rebind: cst.Assign, base: str) -> cst.Call | None:
        """``make()`` of the last ``base = [make() for _ in ...]`` before ``rebind`` in ``func``."""
        start = self.pos(rebind).start.line
        make = None
        for assign in self.nodes(func.body, cst.Assign):
            if assign is rebind or self.pos(assign).start.line >= start:
                continue
            if len(assign.targets) != 1 or self.code(assign.targets[0].target) != base:
                continue
            value = assign.value
            make = None
            if isinstance(value, cst.ListComp) and isinstance(value.elt, cst.Call) and not any(
                isinstance(n, cst.Name) and n.value in _comp_names(value) for n in self.nodes(value.elt, cst.Name)
            ):
                make = value.elt
        return make

    def _fresh_before(self, call: cst.Call, hit: cst.BaseExpression, inputs: list[cst.BaseExpression]) -> None:
        if any(i.deep_equals(hit) for i in inputs):
            raise self.not_applicable(f"the launch at line {self.pos(call).start.line} also reads {self.code(hit)}")
        stmt = self.statement_of(call)
        self._refuse_stranded_alias(hit, stmt)
        self.check_rebindable(hit, stmt, through_return=True)
        text = self.code(hit)
        if self.data["full_write"] is False:
            # the launch may leave elements unwritten (one slab ``mid[0, i, j]`` of a history): the new array starts
            # as a copy, so every element the launch does not write keeps its value (the copy is taped)
            self.insert_before(stmt, [self.statement(f"{text} = {self.warp_alias()}.clone({text})\n")])
            self.context.scratch["summary"] = (f"`{text}` is a copy of itself before the launch at line "
                                               f"{self.pos(call).start.line}, which writes only part of it")
            return
        self.insert_before(stmt, [self.statement(f"{text} = {self.warp_alias()}.empty_like({text})\n")])


    def _refuse_stranded_alias(self, hit: cst.BaseExpression, stmt: cst.BaseStatement) -> None:
        """A slot of a list (``work[(k + 1) % 2]``) that another name also holds (``u.dof_values = work[-1]``,
        outside the loop): a fresh array in the slot would not reach that name, whose readers would then see the
        old array, so the forward would change."""
        if not isinstance(hit, cst.Subscript):
            return
        root = self.code(hit).split("[")[0]
        loop = self.enclosing(stmt, (cst.For, cst.While))
        scope = self.enclosing(stmt, cst.FunctionDef) or self.tree
        for assign in self._scope_assigns(scope):
            if loop is not None and any(a is loop for a in self.ancestors(assign)):
                continue
            targets = [self.code(t.target).split("[")[0].split(".")[0] for t in assign.targets]
            if root in targets:
                continue
            if any(v.split("[")[0] == root and v != root for v in self._bound_places(assign)):
                raise self.not_applicable(
                    f"`{self.code(assign.targets[0].target)}` also holds a slot of {root} (line "
                    f"{self.pos(assign).start.line}): a fresh array in the slot would not reach it")


def _module_names(module: cst.Module) -> set[str]:
    """The names the module's own top-level statements define or import."""
    names: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            names.add(stmt.name.value)
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                names |= {(a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name)
                           else cst.Module(body=()).code_for_node(a.name).split(".")[0]) for a in small.names}
            elif isinstance(small, cst.Assign):
                names |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
    return names


def _comp_names(comp: cst.ListComp) -> set[str]:
    """The names a comprehension's ``for`` clauses bind."""
    names: set[str] = set()
    clause: cst.CompFor | None = comp.for_in
    while clause is not None:
        target = clause.target
        names |= {target.value} if isinstance(target, cst.Name) else set()
        clause = clause.inner_for_in
    return names


def _rotates(comp: cst.ListComp, base: str, code: Callable[[cst.CSTNode], str]) -> bool:
    """Whether ``comp`` is ``[base[... i % m ...] for i in ...]``: slots of ``base`` taken round and round."""
    elt = comp.elt
    if not (isinstance(elt, cst.Subscript) and code(elt.value) == base and len(elt.slice) == 1):
        return False
    index = elt.slice[0].slice
    names = _comp_names(comp)
    mods = [n for n in walk(index) if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)]
    return any(isinstance(n, cst.Name) and n.value in names for m in mods for n in walk(m.left))
