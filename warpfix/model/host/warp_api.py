"""Calls of the Warp API: tapes, launches, allocations, copies."""

from __future__ import annotations

import ast

from warpfix.model.facts import Buffer
from warpfix.model.host.syntax import _ALLOC, _ALLOC_LIKE, _LAUNCH, _label_of, _text
from warpfix.model.host.values import Val, _Frame


class WarpApi:
    """Warp API calls of :class:`~warpfix.model.host.interpreter.HostInterpreter` (a mixin)."""

    # ------------------------------------------------------------------ warp API
    def warp_call(self, name: str, e: ast.Call, frame: _Frame) -> Val:
        src = frame.src
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        if name == "Tape":
            return self.new("tape", "tape", tape=next(self.ids), fresh=True)
        if name in _LAUNCH:
            return self.launch(e, frame)
        if name in _ALLOC or name in _ALLOC_LIKE or name == "clone":
            return self.allocation(name, e, frame)
        if name == "capture_launch" and self.captured_backward:
            for a in e.args:
                self.eval(a, frame)
            self.emit("capture_launch", e, src)
            return self.new("None", "const")
        if name == "copy":
            args = [self.eval(a, frame) for a in e.args]
            dst = args[0] if args else (self.eval(kw["dest"], frame) if "dest" in kw else None)
            srcv = args[1] if len(args) > 1 else (self.eval(kw["src"], frame) if "src" in kw else None)
            if dst is not None and srcv is not None:
                db, sb = self.buffer(dst), self.buffer(srcv)
                dn = _text(e.args[0]) if e.args else _text(kw["dest"])
                sn = _text(e.args[1]) if len(e.args) > 1 else _text(kw["src"])
                self.emit("copy", e, src, writes=[db], reads=[sb], names={db.id: dn, sb.id: sn})
            return self.new("None", "const")
        for a in e.args:
            self.eval(a, frame)
        for k in e.keywords:
            self.eval(k.value, frame)
        return self.new(f"wp.{name}()", "const" if name in ("constant", "vec3", "vec2", "float32") else "unknown")

    def allocation(self, name: str, e: ast.Call, frame: _Frame) -> Val:
        src = frame.src
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        args = [self.eval(a, frame) for a in e.args]
        for k in e.keywords:
            if k.arg not in ("requires_grad",):
                self.eval(k.value, frame)
        rg_node = kw.get("requires_grad")
        explicit = rg_node is not None
        rg: bool | None
        if isinstance(rg_node, ast.Constant) and isinstance(rg_node.value, bool):
            rg = rg_node.value
        elif rg_node is not None:
            # ``requires_grad=requires_grad`` in a helper: the flag its caller passed, when it is a literal
            flag = self.eval(rg_node, frame)
            rg = flag.value if flag.kind == "const" and isinstance(flag.value, bool) else None
        else:
            rg = False
        source: Val | None = None
        if name in _ALLOC_LIKE or name == "clone":
            source = args[0] if args else (self.eval(kw["src"], frame) if "src" in kw else None)
            if source is not None and not explicit:
                rg = source.buf.requires_grad if source.buf is not None else None
        label = _label_of(e)
        v = self.fresh_array(label, src.span(e), name, rg, explicit)
        if name == "array" and "ptr" in kw:
            ptr = kw["ptr"]
            if isinstance(ptr, ast.Attribute) and ptr.attr == "ptr":
                base = self.eval(ptr.value, frame)
                assert v.buf is not None
                v.buf.view_of = self.buffer(base)
                v.buf.fresh = False
        assert v.buf is not None
        reads = [self.buffer(source)] if name == "clone" and source is not None else []
        names: dict[int, str] = {}
        if reads and source is not None:
            names[source.id] = _text(e.args[0] if e.args else kw["src"])
        self.emit("clone" if name == "clone" else "alloc", e, src, writes=[v.buf], reads=reads, names=names,
                  detail={"alloc": name})
        return v

    def launch(self, e: ast.Call, frame: _Frame) -> Val:
        src = frame.src
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        kernel_node = e.args[0] if e.args else kw.get("kernel")
        kernel_val = self.eval(kernel_node, frame) if kernel_node is not None else None
        kernel = kernel_val.kernel if kernel_val is not None else None
        in_node = e.args[2] if len(e.args) > 2 else kw.get("inputs")
        out_node = e.args[3] if len(e.args) > 3 else kw.get("outputs")
        for k in ("dim", "device", "stream"):
            if k in kw:
                self.eval(kw[k], frame)
        arg_nodes: list[ast.expr] = []
        arg_vals: list[Val] = []
        n_inputs = 0
        for group_i, group in enumerate((in_node, out_node)):
            if group is None:
                continue
            if isinstance(group, (ast.List, ast.Tuple)):
                elts = list(group.elts)
                arg_vals.extend(self.eval(a, frame) for a in elts)
                arg_nodes.extend(elts)
            else:
                elts = []
                gv = self.eval(group, frame)
                if self.follow_all and gv.kind == "list" and gv.length is not None and gv.length <= 64:
                    # a library's ``inputs=kernel_inputs`` list (the project's own launch sites stay literal:
                    # codemods rewrite their argument expressions)
                    elts = [group] * gv.length
                    arg_vals.extend(self.item(gv, str(i)) for i in range(gv.length))
                    arg_nodes.extend(elts)
            if group_i == 0:
                n_inputs = len(elts)
        ev_reads: list[Buffer] = []
        ev_writes: list[Buffer] = []
        ev_accums: list[Buffer] = []
        names: dict[int, str] = {}
        binding: dict[str, Buffer] = {}
        arg_map: dict[str, ast.expr] = {}
        ints: dict[str, int] = {}  # the known int arguments (the slab a launch touches: model/slabs.py)

        def add(lst: list[Buffer], b: Buffer) -> None:
            if all(x.id != b.id for x in lst):
                lst.append(b)

        if kernel is not None:
            params = kernel.positional
            for pname, node, val in zip(params, arg_nodes, arg_vals, strict=False):
                arg_map[pname] = node
                facts = kernel.params[pname]
                if val.kind == "int" and type(val.value) is int:
                    ints[pname] = val.value
                if facts.is_array and val.kind not in ("int", "const"):
                    b = self.buffer(val)
                    binding[pname] = b
                    names[b.id] = _text(node)
                    if facts.read:
                        add(ev_reads, b)
                    if facts.written:
                        add(ev_writes, b)
                    if facts.accumulated:
                        add(ev_accums, b)
                # struct fields reached through this parameter
                for fkey, ffacts in kernel.params.items():
                    if not fkey.startswith(pname + ".") or val.kind in ("int", "const"):
                        continue
                    field_name = fkey.split(".", 1)[1]
                    fv = self.attr(val, field_name)
                    fb = self.buffer(fv)
                    binding[fkey] = fb
                    names[fb.id] = f"{_text(node)}.{field_name}"
                    if ffacts.read:
                        add(ev_reads, fb)
                    if ffacts.written:
                        add(ev_writes, fb)
                    if ffacts.accumulated:
                        add(ev_accums, fb)
        else:
            for i, (node, val) in enumerate(zip(arg_nodes, arg_vals, strict=True)):
                if val.kind in ("int", "const"):
                    continue
                b = self.buffer(val)
                names[b.id] = _text(node)
                if i < n_inputs:
                    add(ev_reads, b)
                else:
                    add(ev_writes, b)
        untaped = kw.get("record_tape")
        saved_tapes = self.tapes
        if isinstance(untaped, ast.Constant) and untaped.value is False:
            self.tapes = []
        ev = self.emit(
            "launch",
            e,
            src,
            reads=ev_reads,
            writes=ev_writes,
            accums=ev_accums,
            names=names,
            kernel=kernel,
            binding=binding,
            arg_nodes=arg_map,
            detail={"kernel": _text(kernel_node) if kernel_node is not None else "?",
                    "n_inputs": n_inputs, **({"ints": ints} if ints else {})},
        )
        self.tapes = saved_tapes
        if not ev.tapes and saved_tapes:
            ev.detail["record_tape"] = False
        if ev.tapes:
            opened = self.scope_depth.get(ev.tapes[-1].instance, 0)
            if any(self.if_depth.get(if_id, 0) > opened for if_id, _ in ev.branches):
                # under an undecided ``if`` of a function the taped block calls (a solver's
                # ``if model.tendon_count:``): the tape may record it, nothing says it does
                ev.detail["conditional"] = True
        return self.new("None", "const")
